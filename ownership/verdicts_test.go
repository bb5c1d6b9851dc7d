package ownership

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestApplyTrustsTheVerdictOnACreateAcrossTheFirstStatus: the answer to a
// create has no status.observedGeneration yet; once the Deployment
// controller's status write shows it, with the generation and metadata the
// create left, the verdict stands and nothing is compared (the cached copy
// is edited behind the kit's back to tell: a comparison would apply). A new
// generation is still compared.
func TestApplyTrustsTheVerdictOnACreateAcrossTheFirstStatus(t *testing.T) {
	a, c, owner := answeringApplier(t, true)
	d := &appsv1.Deployment{}
	res, err := a.Apply(t.Context(), owner, testDeployment(), Into(d))
	require.NoError(t, err)
	require.Equal(t, Created, res)
	require.Zero(t, d.Status.ObservedGeneration, "a created object's answer has no status")

	c.rolledOut(d)
	d.Spec.Template.Spec.Containers[0].Image = "edited"
	res, err = a.Apply(t.Context(), owner, testDeployment())
	require.NoError(t, err)
	assert.Equal(t, Unchanged, res, "the first status write of a created object must keep the verdict")
	assert.Equal(t, 1, c.sent)

	c.rv++
	d.ResourceVersion, d.Generation = "999", 2
	res, err = a.Apply(t.Context(), owner, testDeployment())
	require.NoError(t, err)
	assert.Equal(t, Updated, res, "a new generation must be compared, and the edit applied")
	assert.Equal(t, 2, c.sent)
}

// TestApplyReadsTheCacheOnceForANewObject: the read that looks for a
// verdict is the read that finds no object, so a create reads the cache
// once; a configuration that does not say its name is read once too.
func TestApplyReadsTheCacheOnceForANewObject(t *testing.T) {
	a, c, owner := answeringApplier(t, true)
	res, err := a.Apply(t.Context(), owner, testDeployment())
	require.NoError(t, err)
	require.Equal(t, Created, res)
	assert.Equal(t, 1, c.gets, "reads of the cache for one create")

	c.gets = 0
	_, says := any(unnamed{}).(identified)
	require.False(t, says, "unnamed must not say its name")
	res, err = a.Apply(t.Context(), owner, unnamed{testDeployment()})
	require.NoError(t, err)
	require.Equal(t, Created, res)
	assert.Equal(t, 1, c.gets, "reads of the cache for one create of a configuration without GetName")
}

// unnamed hides its configuration's identity (GetName and the rest):
// Apply must decode it to know which object it names.
type unnamed struct {
	d *appsv1ac.DeploymentApplyConfiguration
}

func (unnamed) IsApplyConfiguration() {}

func (u unnamed) MarshalJSON() ([]byte, error) { return json.Marshal(u.d) }

// TestApplyTrustsTheVerdictAcrossTheDeploymentRevision: the Deployment
// controller's revision annotation, written after a create (and after every
// template change) with or just before its status, keeps the verdict; the
// cached copy is edited behind the kit's back to tell. A configuration that
// sets that annotation itself is judged on the resourceVersion alone, and
// any other annotation change is compared.
func TestApplyTrustsTheVerdictAcrossTheDeploymentRevision(t *testing.T) {
	const revision = "deployment.kubernetes.io/revision"
	a, c, owner := answeringApplier(t, true)
	d := &appsv1.Deployment{}
	res, err := a.Apply(t.Context(), owner, testDeployment(), Into(d))
	require.NoError(t, err)
	require.Equal(t, Created, res)

	c.rolledOut(d)
	d.Annotations[revision] = "1"
	d.Spec.Template.Spec.Containers[0].Image = "edited"
	res, err = a.Apply(t.Context(), owner, testDeployment())
	require.NoError(t, err)
	assert.Equal(t, Unchanged, res, "the revision annotation must keep the verdict")

	c.rv++
	d.ResourceVersion, d.Annotations["team"] = strconv.Itoa(c.rv), "other"
	res, err = a.Apply(t.Context(), owner, testDeployment())
	require.NoError(t, err)
	assert.Equal(t, Updated, res, "another annotation must be compared, and the edit applied")

	// The configuration sets the annotation itself: a change of it, even
	// with the generation and the rest of the metadata as they were, is
	// compared.
	withRevision := func() runtime.ApplyConfiguration {
		return testDeployment().WithAnnotations(map[string]string{revision: "7"})
	}
	a, c, owner = answeringApplier(t, true)
	d = &appsv1.Deployment{}
	res, err = a.Apply(t.Context(), owner, withRevision(), Into(d))
	require.NoError(t, err)
	require.Equal(t, Created, res)
	c.rolledOut(d)
	d.Annotations[revision] = "8"
	res, err = a.Apply(t.Context(), owner, withRevision())
	require.NoError(t, err)
	assert.Equal(t, Updated, res, "an annotation the configuration sets must be compared")
}

// The generation shortcut (a verdict standing across writes that leave the
// generation and metadata alone) is taken only for kinds whose API server
// bumps the generation on every spec change. A HorizontalPodAutoscaler
// reports status.observedGeneration, but on a cluster without the HPA
// generation feature its spec changes leave the generation as it was:
// another writer's edit of its spec kept the verdict, and Apply answered
// Unchanged without comparing. A Deployment and a custom resource keep the
// shortcut.
func TestVerdictGenerationShortcutOnlyForKindsWhoseGenerationFollowsTheSpec(t *testing.T) {
	one := int64(1)
	for _, tt := range []struct {
		name     string
		gk       schema.GroupKind
		obj      client.Object
		shortcut bool
	}{
		{"HorizontalPodAutoscaler", schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"},
			&autoscalingv2.HorizontalPodAutoscaler{Status: autoscalingv2.HorizontalPodAutoscalerStatus{ObservedGeneration: &one}}, false},
		{"Deployment", schema.GroupKind{Group: "apps", Kind: "Deployment"},
			&appsv1.Deployment{Status: appsv1.DeploymentStatus{ObservedGeneration: 1}}, true},
		{"custom resource", schema.GroupKind{Group: "example.com", Kind: "Widget"}, func() client.Object {
			u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"observedGeneration": int64(1)}}}
			u.SetAPIVersion("example.com/v1")
			u.SetKind("Widget")
			return u
		}(), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var v verdicts
			obj := tt.obj
			obj.SetUID("uid-1")
			obj.SetGeneration(1)
			obj.SetResourceVersion("10")
			v.remember(obj, tt.gk, 42, false)
			// Written since, by someone: its resourceVersion moved, its
			// generation and metadata did not.
			obj.SetResourceVersion("11")
			assert.Equal(t, tt.shortcut, v.matches(obj, 42))
		})
	}
}
