package controller_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"slices"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/sharding"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

// shardedOperator is one replica started by startShardedOperator.
type shardedOperator struct {
	*sharding.Member
	cache cache.Cache
}

// startShardedOperator runs the controller as main.go does with
// --sharding: a Member named identity in ns, the cache selected by its
// claims, and the controller set up with it. The operator stops with the
// test.
func startShardedOperator(t *testing.T, ns, identity string) shardedOperator {
	t.Helper()
	leases, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	member, err := sharding.New(sharding.Options{
		Group: "webapp-operator", Identity: identity, Namespace: ns, APIReader: leases, Client: leases,
		Ranges: 8, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
		Logger: logr.Discard(),
	})
	require.NoError(t, err)
	cacheOpts, err := controller.SelectCache(controller.CacheOptions(ns), member, env.Scheme)
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cacheOpts,
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	require.NoError(t, err)
	require.NoError(t, mgr.Add(member))
	_, err = controller.Setup(mgr, ns, member)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return shardedOperator{Member: member, cache: mgr.GetCache()}
}

// Two sharded operators share the WebApps: each replica owns some of the
// ranges, every WebApp gets its Deployment and Service, labelled with the
// WebApp's range, and its registry entry, and each replica's cache holds
// the WebApps, Deployments and Services of its own ranges only (envtest's
// API server has no shard filter: the caches drop the others' objects).
func TestShardedOperators(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	members := []shardedOperator{startShardedOperator(t, ns, "a"), startShardedOperator(t, ns, "b")}
	require.Eventually(t, func() bool {
		a, b := members[0].Owned(), members[1].Owned()
		return len(a) > 0 && len(b) > 0 && len(a)+len(b) == 8
	}, 30*time.Second, 50*time.Millisecond, "the two replicas share the 8 ranges")

	var apps []*webappv2.WebApp
	for i := range 12 {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%02d", i), Namespace: ns},
			Spec: webappv2.WebAppSpec{Image: "web:1"}}
		require.NoError(t, env.Client.Create(ctx, app))
		apps = append(apps, app)
	}
	perReplica := map[int]int{}
	for _, app := range apps {
		key := client.ObjectKeyFromObject(app)
		rng := strconv.Itoa(sharding.RangeOf(app.UID, 8))
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
			require.Eventually(t, func() bool {
				err := env.Client.Get(ctx, key, obj)
				return err == nil && obj.GetLabels()["sharding.reconcilekit.io/range-webapp-operator"] == rng
			}, 30*time.Second, 50*time.Millisecond, "%T %s labelled with range %s", obj, key, rng)
		}
		require.Eventually(t, func() bool {
			cm := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: controller.RegistryShard(ns, app.Name)}, cm)
			return err == nil && cm.Data[controller.RegistryKey(ns, app.Name)] != ""
		}, 30*time.Second, 50*time.Millisecond, "%s is registered", key)
		for i, m := range members {
			if m.Owns(app) {
				perReplica[i]++
			}
		}
	}
	t.Logf("WebApps per replica: %v", perReplica)

	for i, m := range members {
		var want []string
		for _, app := range apps {
			if m.Owns(app) {
				want = append(want, app.Name)
			}
		}
		for _, list := range []client.ObjectList{&webappv2.WebAppList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}} {
			require.Eventually(t, func() bool {
				require.NoError(t, m.cache.List(ctx, list, client.InNamespace(ns)))
				var got []string
				require.NoError(t, meta.EachListItem(list, func(o runtime.Object) error {
					got = append(got, o.(client.Object).GetName())
					return nil
				}))
				slices.Sort(got)
				return slices.Equal(got, want)
			}, 30*time.Second, 50*time.Millisecond, "replica %d caches the %T of its ranges only: %v", i, list, want)
		}
	}
}
