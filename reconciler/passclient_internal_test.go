package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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

// TestPassClientFloor: after a WaitFor step found an object at a
// resourceVersion (atLeast), a Get of it through the pass's client reads
// the API server only when the cache answers an older copy or NotFound,
// whatever form the read takes; resourceVersions that cannot be compared
// are never older, and other objects are not affected.
func TestPassClientFloor(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	cm := func(name, rv, value string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv}, Data: map[string]string{"v": value}}
	}
	key := client.ObjectKey{Namespace: "ns", Name: "cm"}
	configMaps := schema.GroupKind{Kind: "ConfigMap"}
	for _, tt := range []struct {
		name   string
		cached client.Object // nil: not in the cache
		gk     schema.GroupKind
		floor  string
		read   client.Object
		live   bool // read from the API server
	}{
		{"no floor", cm("cm", "10", "cached"), configMaps, "", &corev1.ConfigMap{}, false},
		{"cached at the floor", cm("cm", "10", "cached"), configMaps, "10", &corev1.ConfigMap{}, false},
		{"cached past the floor", cm("cm", "11", "cached"), configMaps, "10", &corev1.ConfigMap{}, false},
		{"cached behind the floor", cm("cm", "9", "cached"), configMaps, "10", &corev1.ConfigMap{}, true},
		{"not cached yet", nil, configMaps, "10", &corev1.ConfigMap{}, true},
		{"unstructured, behind", cm("cm", "9", "cached"), configMaps, "10", &unstructured.Unstructured{}, true},
		{"metadata only, behind", cm("cm", "9", "cached"), configMaps, "10", &metav1.PartialObjectMetadata{}, true},
		{"incomparable", cm("cm", "9", "cached"), configMaps, "x10", &corev1.ConfigMap{}, false},
		{"another kind's floor", cm("cm", "9", "cached"), schema.GroupKind{Kind: "Secret"}, "10", &corev1.ConfigMap{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cache := fake.NewClientBuilder().WithScheme(scheme)
			if tt.cached != nil {
				cache = cache.WithObjects(tt.cached)
			}
			server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm("cm", "12", "live")).Build()
			var liveReads int
			reader := interceptor.NewClient(server, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				liveReads++
				return c.Get(ctx, key, obj, opts...)
			}})
			pc := newPassClient(cache.Build(), reader)
			pc.atLeast(tt.gk, key, tt.floor)
			tt.read.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			require.NoError(t, pc.Get(ctx, key, tt.read))
			want := "10"
			if tt.cached != nil {
				want = tt.cached.GetResourceVersion()
			}
			wantReads := 0
			if tt.live {
				want, wantReads = "12", 1
			}
			assert.Equal(t, want, tt.read.GetResourceVersion())
			assert.Equal(t, wantReads, liveReads)
			if typed, ok := tt.read.(*corev1.ConfigMap); ok && tt.live {
				assert.Equal(t, "live", typed.Data["v"])
				// The live copy is recorded: the next read of the pass
				// answers it without another request.
				again := &corev1.ConfigMap{}
				require.NoError(t, pc.Get(ctx, key, again))
				assert.Equal(t, "live", again.Data["v"])
				assert.Equal(t, 1, liveReads)
			}
		})
	}
}
