package reconciler_test

import (
	"context"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// runCachedManager starts a manager whose cache is CacheOptions(opts), and
// returns it once its cache has started.
func runCachedManager(t *testing.T, opts cache.Options) (manager.Manager, context.Context) {
	t.Helper()
	testenv.Require(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   reconciler.CacheOptions(opts),
	})
	require.NoError(t, err)
	return mgr, testenv.RunManager(t, mgr)
}

// TestCacheOptionsInternsMetadata: two Services the API server sent apart,
// read through a cache built by CacheOptions after managedFields are
// stripped, hold their common metadata strings once, with every value as
// the API server has it.
func TestCacheOptionsInternsMetadata(t *testing.T) {
	mgr, ctx := runCachedManager(t, cache.Options{DefaultTransform: cache.TransformStripManagedFields()})
	ns := env.Namespace(t)

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
	for k := range a.Annotations {
		for k2 := range b.Annotations {
			assert.True(t, same(k, k2), "annotation key %s", k)
		}
	}
	assert.True(t, same(a.Labels["app.kubernetes.io/name"], b.Spec.Selector["app.kubernetes.io/name"]), "label and selector value")
	for k := range a.Labels {
		for k2 := range b.Labels {
			if k == k2 {
				assert.True(t, same(k, k2), "label key %s", k)
			}
		}
	}
}

// TestCacheOptionsSharedResourcesStayIsolated: two Deployments with the same
// resources share one cached map, and a caller changing what the cached
// client returned for one changes neither the other nor the cache.
func TestCacheOptionsSharedResourcesStayIsolated(t *testing.T) {
	mgr, ctx := runCachedManager(t, cache.Options{})
	ns := env.Namespace(t)

	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	labels := map[string]string{"app": "web"}
	for _, name := range []string{"a", "b"} {
		require.NoError(t, env.Client.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "web:v1", Resources: corev1.ResourceRequirements{Limits: limits}}},
				}},
			},
		}))
	}
	get := func(name string) *appsv1.Deployment {
		var d appsv1.Deployment
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)
			return err == nil, client.IgnoreNotFound(err)
		}))
		return &d
	}
	a := get("a")
	get("b")
	limitsOf := func(d *appsv1.Deployment) corev1.ResourceList {
		return d.Spec.Template.Spec.Containers[0].Resources.Limits
	}

	// The informer's own copies share the map.
	inf, err := mgr.GetCache().GetInformer(ctx, &appsv1.Deployment{})
	require.NoError(t, err)
	store := inf.(toolscache.SharedIndexInformer).GetStore()
	stored := func(name string) *appsv1.Deployment {
		o, ok, err := store.GetByKey(ns + "/" + name)
		require.NoError(t, err)
		require.True(t, ok)
		return o.(*appsv1.Deployment)
	}
	require.Equal(t, reflect.ValueOf(limitsOf(stored("a"))).UnsafePointer(), reflect.ValueOf(limitsOf(stored("b"))).UnsafePointer(),
		"the cache holds one map for both")

	limitsOf(a)[corev1.ResourceCPU] = resource.MustParse("4")
	a.Spec.Template.Labels["app"] = "changed"

	for _, name := range []string{"a", "b"} {
		d := get(name)
		cpu := limitsOf(d)[corev1.ResourceCPU]
		assert.Equal(t, "500m", cpu.String(), "Deployment %s", name)
		assert.Equal(t, "web", d.Spec.Template.Labels["app"], "Deployment %s", name)
		assert.Equal(t, "web", d.Labels["app"], "Deployment %s", name)
	}
}
