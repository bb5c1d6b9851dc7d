package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// identify reads a generated apply configuration through its getters and
// anything else through JSON, with the same answers.
func TestIdentify(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "owners", Name: "o"}}
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(deployment)
	u.SetName("d")
	for name, tc := range map[string]struct {
		desired interface{ IsApplyConfiguration() }
		key     client.ObjectKey
	}{
		"generated":                       {appsv1ac.Deployment("d", "ns"), client.ObjectKey{Namespace: "ns", Name: "d"}},
		"generated, owner's namespace":    {appsv1ac.Deployment("d", ""), client.ObjectKey{Namespace: "owners", Name: "d"}},
		"unstructured, owner's namespace": {client.ApplyConfigurationFromUnstructured(u), client.ObjectKey{Namespace: "owners", Name: "d"}},
	} {
		t.Run(name, func(t *testing.T) {
			gvk, key, err := identify(tc.desired, owner)
			require.NoError(t, err)
			assert.Equal(t, deployment, gvk)
			assert.Equal(t, tc.key, key)
		})
	}
	var nilConfig *appsv1ac.DeploymentApplyConfiguration
	_, _, err := identify(nilConfig, owner)
	assert.ErrorContains(t, err, "build desired with its constructor")
	_, _, err = identify(&appsv1ac.DeploymentApplyConfiguration{}, owner)
	assert.ErrorContains(t, err, "build desired with its constructor")
}
