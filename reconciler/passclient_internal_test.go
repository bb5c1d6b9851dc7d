package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestDeleteAllOfCovers: which objects a DeleteAllOf hides from the rest of
// the pass. A field selector the pass cannot evaluate covers everything
// else the DeleteAllOf selects (the API server then decides).
func TestDeleteAllOfCovers(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"app": "x"}}}
	for _, tt := range []struct {
		name string
		d    collection
		want bool
	}{
		{"kind and namespace", collection{gvk: cm, namespace: "ns"}, true},
		{"all namespaces", collection{gvk: cm}, true},
		{"another kind", collection{gvk: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, namespace: "ns"}, false},
		{"another namespace", collection{gvk: cm, namespace: "other"}, false},
		{"matching labels", collection{gvk: cm, namespace: "ns", labels: labels.SelectorFromSet(labels.Set{"app": "x"})}, true},
		{"other labels", collection{gvk: cm, namespace: "ns", labels: labels.SelectorFromSet(labels.Set{"app": "y"})}, false},
		{"its name", collection{gvk: cm, fields: fields.OneTermEqualSelector("metadata.name", "a")}, true},
		{"another name", collection{gvk: cm, fields: fields.OneTermEqualSelector("metadata.name", "b")}, false},
		{"not another name", collection{gvk: cm, fields: fields.OneTermNotEqualSelector("metadata.name", "b")}, true},
		{"a field it cannot evaluate", collection{gvk: cm, fields: fields.OneTermEqualSelector("type", "Opaque")}, true},
		{"a field it cannot evaluate, other labels", collection{gvk: cm, labels: labels.SelectorFromSet(labels.Set{"app": "y"}),
			fields: fields.OneTermEqualSelector("type", "Opaque")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.d.covers(cm, obj))
		})
	}
}
