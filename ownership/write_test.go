package ownership

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestAdoptionRefusedErrorNamesEverything(t *testing.T) {
	err := &AdoptionRefusedError{
		Kind:         "Namespace",
		Key:          client.ObjectKey{Name: "victim"},
		Owner:        metav1.OwnerReference{Kind: "Tenant", Name: "acme", UID: "u-1"},
		FieldManager: "tenant-operator",
	}
	assert.Equal(t, `refusing to adopt Namespace victim for Tenant "acme" (uid u-1): it exists without a controller and `+
		`field manager "tenant-operator" never wrote it; delete or rename it, or apply with ownership.Adopt() to take it over`, err.Error())

	err.wrote = true
	assert.Equal(t, `refusing to adopt Namespace victim for Tenant "acme" (uid u-1): it exists without a controller and `+
		`field manager "tenant-operator" wrote it, but not for this owner: no owner reference with its uid, `+
		`and not the configuration it last applied for it; delete or rename it, or apply with ownership.Adopt() to take it over`, err.Error())
}

// replaced recognises the API server's two answers to an apply whose
// metadata.uid names an object that is no longer there, and nothing else.
func TestReplaced(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"gone", apierrors.NewConflict(gr, "cfg", errors.New("uid mismatch: the provided object specified uid 1, and no existing object was found")), true},
		{"another incarnation", apierrors.NewInvalid(gk, "cfg", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "2", "field is immutable")}), true},
		{"invalid elsewhere", apierrors.NewInvalid(gk, "cfg", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "bad")}), false},
		{"not found", apierrors.NewNotFound(gr, "cfg"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, replaced(tt.err))
		})
	}
}

// TestApplyTakesAChangedConfigHashAsDrift: a live object without the
// configuration's hash is applied without a comparison, and reported as
// drifted at the annotation; one with the hash is still compared field by
// field, so an edit behind our back is applied, and a match is not.
func TestApplyTakesAChangedConfigHashAsDrift(t *testing.T) {
	a, _, owner := convergedApplier(t)
	c := a.Client.(*cachedReader)
	c.live.ResourceVersion = "7"
	hash := c.live.Annotations[ConfigHashAnnotation]
	d, err := a.buildDesired(t.Context(), owner, testDeployment(), mustEncode(t, testDeployment()), options{})
	require.NoError(t, err)
	require.Equal(t, hash, d.hash(), "the cached object was applied with this configuration")

	path, drifted, err := a.drifted(d, c.live)
	require.NoError(t, err)
	assert.False(t, drifted, "matching object found drifted at %s", path)

	c.live.Annotations[ConfigHashAnnotation] = "stale"
	c.live.Spec.Template.Spec.Containers[1].Image = "edited"
	path, drifted, err = a.drifted(d, c.live)
	require.NoError(t, err)
	assert.True(t, drifted)
	assert.Equal(t, "metadata.annotations."+ConfigHashAnnotation, path)
	allocs := testing.AllocsPerRun(10, func() { _, _, _ = a.drifted(d, c.live) })
	assert.Zero(t, allocs, "a changed hash must be judged without converting or comparing the object")
	_, err = a.Apply(t.Context(), owner, testDeployment())
	assert.ErrorIs(t, err, errSent, "a changed hash must be applied")

	c.live.Annotations[ConfigHashAnnotation] = hash
	c.live.ResourceVersion = "8"
	path, drifted, err = a.drifted(d, c.live)
	require.NoError(t, err)
	assert.True(t, drifted, "with the hash unchanged, the fields must still be compared")
	assert.Equal(t, "spec.template.spec.containers[name=app].image", path)
	_, err = a.Apply(t.Context(), owner, testDeployment())
	assert.ErrorIs(t, err, errSent, "an edited field under an unchanged hash must be applied")

	c.live.Spec.Template.Spec.Containers[1].Image = *testDeployment().Spec.Template.Spec.Containers[0].Image
	c.live.ResourceVersion = "9"
	res, err := a.Apply(t.Context(), owner, testDeployment())
	require.NoError(t, err)
	assert.Equal(t, Unchanged, res)
}

func mustEncode(t *testing.T, desired runtime.ApplyConfiguration) []byte {
	t.Helper()
	b, err := encode(desired)
	require.NoError(t, err)
	return b
}

// TestSendLeavesTheConfigurationAlone: send writes its precondition and
// takes the answer in a copy, so the configuration Apply compares with the
// answer, and sends again when the object was replaced, is what the caller
// asked for: a second send carries its own precondition, not the first's.
func TestSendLeavesTheConfigurationAlone(t *testing.T) {
	a, c, owner := answeringApplier(t, true)
	c.keepSent = true
	d, err := a.buildDesired(t.Context(), owner, testDeployment(), mustEncode(t, testDeployment()), options{})
	require.NoError(t, err)
	want := runtime.DeepCopyJSON(d.config)

	answer, err := a.send(t.Context(), d, precondition{resourceVersion: createOnly})
	require.NoError(t, err)
	assert.True(t, answer.matches)
	assert.Equal(t, want, d.config, "the configuration after a create-only send")
	assert.Equal(t, createOnly, c.lastSent["metadata"].(map[string]any)["resourceVersion"])

	_, err = a.send(t.Context(), d, precondition{uid: "u-1"})
	require.NoError(t, err)
	assert.Equal(t, want, d.config, "the configuration after a send to an existing object")
	md := c.lastSent["metadata"].(map[string]any)
	assert.Equal(t, "u-1", md["uid"])
	assert.NotContains(t, md, "resourceVersion", "the second send carried the first's precondition")
}
