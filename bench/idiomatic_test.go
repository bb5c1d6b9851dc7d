package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/bench/idiomatic"
	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

// startIdiomatic runs the idiomatic operator's manager, with its own cache
// options, on envtest until the test ends, and returns its reconciler and
// cached client.
func startIdiomatic(t *testing.T, registryNS string, shards uint32) (*idiomatic.Reconciler, client.Client) {
	t.Helper()
	scheme, err := idiomatic.NewScheme()
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      idiomatic.CacheOptions(registryNS),
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	require.NoError(t, err)
	r, err := idiomatic.Setup(mgr, registryNS, shards)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "manager stopped with an error")
		case <-time.After(time.Minute):
			t.Error("manager did not stop within a minute")
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	require.True(t, mgr.GetCache().WaitForCacheSync(syncCtx), "cache did not sync")
	return r, mgr.GetClient()
}

// TestIdiomaticConverges proves the idiomatic peer is the same operator as
// the example: it applies the Deployment and Service (owned, labelled),
// registers the WebApp behind its finalizer, reports Ready only once the
// Deployment is rolled out (envtest runs no controller-manager, so the
// test writes the Deployment's status as it would), writes nothing that
// changes anything on a converged pass, caches only what it labelled, and
// deregisters on deletion.
func TestIdiomaticConverges(t *testing.T) {
	testenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, registryNS := env.Namespace(t), env.Namespace(t)
	r, cached := startIdiomatic(t, registryNS, 0)
	c := env.Client
	const within, every = 30 * time.Second, 50 * time.Millisecond

	app := &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec:       webappv1.WebAppSpec{Image: "registry.example.com/shop:v1", Replicas: new(int32(1))},
	}
	require.NoError(t, c.Create(ctx, app))
	key := client.ObjectKeyFromObject(app)

	var deploy appsv1.Deployment
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, c.Get(ctx, key, &deploy))
		var svc corev1.Service
		require.NoError(ct, c.Get(ctx, key, &svc))
		assert.Len(ct, svc.OwnerReferences, 1)
		assert.Equal(ct, "webapp-operator", svc.Labels["app.kubernetes.io/managed-by"])
		var got webappv1.WebApp
		require.NoError(ct, c.Get(ctx, key, &got))
		assert.Contains(ct, got.Finalizers, idiomatic.Finalizer)
		assert.Equal(ct, &got.Generation, got.Status.ObservedGeneration)
		assert.False(ct, got.Status.IsReady(), "Ready before the Deployment rolled out")
		avail := meta.FindStatusCondition(got.Status.Conditions, webappv1.Available)
		if assert.NotNil(ct, avail) {
			assert.Equal(ct, metav1.ConditionFalse, avail.Status)
		}
		assert.True(ct, meta.IsStatusConditionTrue(got.Status.Conditions, "Reconciling"))
		var cm corev1.ConfigMap
		require.NoError(ct, c.Get(ctx, types.NamespacedName{Namespace: registryNS, Name: idiomatic.RegistryName}, &cm))
		assert.Equal(ct, "http://shop."+ns+".svc:80", cm.Data[ns+".shop"])
	}, within, every)
	require.Len(t, deploy.OwnerReferences, 1)
	assert.Equal(t, "WebApp", deploy.OwnerReferences[0].Kind)
	assert.Equal(t, "registry.example.com/shop:v1", deploy.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, "500m", deploy.Spec.Template.Spec.Containers[0].Resources.Limits.Cpu().String(), "the default")

	// What kube-controller-manager and kwok would report once rolled out.
	deploy.Status = appsv1.DeploymentStatus{ObservedGeneration: deploy.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	require.NoError(t, c.Status().Update(ctx, &deploy))
	var ready webappv1.WebApp
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, c.Get(ctx, key, &ready))
		assert.True(ct, ready.Status.IsReady())
		assert.True(ct, meta.IsStatusConditionTrue(ready.Status.Conditions, "Ready"))
		assert.Nil(ct, meta.FindStatusCondition(ready.Status.Conditions, "Reconciling"))
		assert.Equal(ct, new(int32(1)), ready.Status.ReadyReplicas)
		assert.NotEmpty(ct, ready.Status.Selector)
	}, within, every)

	// A converged pass, from the manager's cache once it holds what the
	// apiserver holds: nothing stored changes.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var fromCache webappv1.WebApp
		require.NoError(ct, cached.Get(ctx, key, &fromCache))
		assert.Equal(ct, ready.ResourceVersion, fromCache.ResourceVersion)
		var d appsv1.Deployment
		require.NoError(ct, cached.Get(ctx, key, &d))
		assert.Equal(ct, deploy.Generation, d.Status.ObservedGeneration)
	}, within, every)
	rvs := func() [3]string {
		var a webappv1.WebApp
		var d appsv1.Deployment
		var cm corev1.ConfigMap
		require.NoError(t, c.Get(ctx, key, &a))
		require.NoError(t, c.Get(ctx, key, &d))
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: registryNS, Name: idiomatic.RegistryName}, &cm))
		return [3]string{a.ResourceVersion, d.ResourceVersion, cm.ResourceVersion}
	}
	// The manager's controller runs too: wait until it has nothing queued
	// or running, so what changes below is the direct pass's doing.
	waitControllerIdle(t, idiomatic.ControllerName, within)
	before := rvs()
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	assert.Zero(t, res)
	assert.Equal(t, before, rvs(), "a converged pass changed the WebApp, the Deployment or the registry")

	// The cache holds only what the operator labelled.
	other := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated", Labels: map[string]string{"app": "unrelated"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "unrelated"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "unrelated"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}},
			},
		},
	}
	require.NoError(t, c.Create(ctx, other))
	var list appsv1.DeploymentList
	require.NoError(t, cached.List(ctx, &list, client.InNamespace(ns)))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "shop", list.Items[0].Name)
	assert.Empty(t, list.Items[0].ManagedFields, "managedFields are stripped from the cache")

	// Deletion: the entry leaves the registry, then the WebApp goes.
	require.NoError(t, c.Delete(ctx, &ready))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		err := c.Get(ctx, key, &webappv1.WebApp{})
		assert.True(ct, apierrors.IsNotFound(err), "WebApp still there: %v", err)
		var cm corev1.ConfigMap
		require.NoError(ct, c.Get(ctx, types.NamespacedName{Namespace: registryNS, Name: idiomatic.RegistryName}, &cm))
		assert.NotContains(ct, cm.Data, ns+".shop")
	}, within, every)
}

// TestIdiomaticShardedRegistry: with a sharded registry each WebApp's
// entry lands in the ConfigMap its name hashes to, and leaves it on
// deletion.
func TestIdiomaticShardedRegistry(t *testing.T) {
	testenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, registryNS := env.Namespace(t), env.Namespace(t)
	startIdiomatic(t, registryNS, 16)
	c := env.Client
	reg := idiomatic.ShardedConfigMapRegistry{Namespace: registryNS, Shards: 16}
	shards := map[string]bool{}
	var apps []*webappv1.WebApp
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: webappv1.WebAppSpec{Image: "web:v1"}}
		require.NoError(t, c.Create(ctx, app))
		apps = append(apps, app)
		shards[reg.ShardName(app)] = true
	}
	require.Greater(t, len(shards), 1, "six names all hashed to one shard")
	for shard := range shards {
		assert.Regexp(t, `^webapp-registry-(0[0-9]|1[0-5])$`, shard)
	}
	entries := func(ct *assert.CollectT) map[string]string {
		all := map[string]string{}
		for shard := range shards {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, types.NamespacedName{Namespace: registryNS, Name: shard}, &cm); apierrors.IsNotFound(err) {
				continue
			} else if !assert.NoError(ct, err) {
				return nil
			}
			assert.Equal(ct, "shard", cm.Labels[idiomatic.RegistryShardLabel])
			for k, v := range cm.Data {
				// The operator registers every WebApp in the cluster: only
				// this test's namespace is its to judge.
				name, ours := strings.CutPrefix(k, ns+".")
				if !ours {
					continue
				}
				assert.Equal(ct, shard, reg.ShardName(&webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}), "%s in the wrong shard", k)
				all[k] = v
			}
		}
		return all
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := entries(ct)
		for _, app := range apps {
			assert.Equal(ct, "http://"+app.Name+"."+ns+".svc:80", got[ns+"."+app.Name])
		}
	}, 30*time.Second, 50*time.Millisecond)
	var single corev1.ConfigMap
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Namespace: registryNS, Name: idiomatic.RegistryName}, &single)),
		"the single registry ConfigMap is not written when sharded")
	for _, app := range apps {
		require.NoError(t, c.Delete(ctx, app))
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Empty(ct, entries(ct))
	}, 30*time.Second, 50*time.Millisecond)
}

// waitControllerIdle polls controller-runtime's metrics until the named
// controller has no queued item and no running reconcile.
func waitControllerIdle(t *testing.T, controller string, within time.Duration) {
	t.Helper()
	gauge := func(families []*dto.MetricFamily, name, label string) float64 {
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == label && l.GetValue() == controller {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		return -1
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		families, err := crmetrics.Registry.Gather()
		require.NoError(ct, err)
		assert.Zero(ct, gauge(families, "workqueue_depth", "name"), "queued")
		assert.Zero(ct, gauge(families, "controller_runtime_active_workers", "controller"), "running")
	}, within, 50*time.Millisecond)
}
