package reconciler_test

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// TestCacheOptionsInternsMetadata: two Services the API server sent apart,
// read through a cache built by CacheOptions after managedFields are
// stripped, hold their common metadata strings once, with every value as
// the API server has it.
func TestCacheOptionsInternsMetadata(t *testing.T) {
	ns := env.Namespace(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   reconciler.CacheOptions(cache.Options{DefaultTransform: cache.TransformStripManagedFields()}),
	})
	require.NoError(t, err)
	ctx := testenv.RunManager(t, mgr)

	labels := map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/managed-by": "test"}
	for _, name := range []string{"a", "b"} {
		require.NoError(t, env.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels,
				Annotations: map[string]string{"example.com/note": "same"}, Finalizers: []string{"example.com/keep"}},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
		}))
	}
	t.Cleanup(func() {
		for _, name := range []string{"a", "b"} {
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
			_ = env.Client.Patch(context.Background(), s, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
		}
	})

	var a, b corev1.Service
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &a); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, &b)
		return err == nil, client.IgnoreNotFound(err)
	}))

	var truth corev1.Service
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &truth))
	truth.ManagedFields = nil
	a.TypeMeta = truth.TypeMeta // the cached client fills it in
	assert.Equal(t, truth, a, "the cached copy is the API server's, managedFields stripped")

	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	assert.True(t, same(a.Namespace, b.Namespace), "namespace")
	assert.True(t, same(a.Finalizers[0], b.Finalizers[0]), "finalizer")
	assert.True(t, same(a.Annotations["example.com/note"], b.Annotations["example.com/note"]), "annotation value")
	assert.True(t, same(a.Labels["app.kubernetes.io/name"], b.Spec.Selector["app.kubernetes.io/name"]), "label and selector value")
	for k := range a.Labels {
		for k2 := range b.Labels {
			if k == k2 {
				assert.True(t, same(k, k2), "label key %s", k)
			}
		}
	}
}
