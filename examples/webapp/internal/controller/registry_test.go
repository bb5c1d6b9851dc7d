package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest/cachelag"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

// appsInTwoShards returns two WebApp names in ns whose entries live in
// different shards.
func appsInTwoShards(t *testing.T, ns string) (a, b string) {
	t.Helper()
	a = "shop"
	for i := range 100 {
		b = fmt.Sprintf("blog-%d", i)
		if controller.RegistryShard(ns, a) != controller.RegistryShard(ns, b) {
			return a, b
		}
	}
	t.Fatal("no second name in another shard")
	return "", ""
}

// TestRegistryShards runs the controller as main.go does and reads through
// the manager's cached client: two WebApps whose entries hash to different
// shards are each registered in their own shard (labelled, so readers and
// the operator's cache find them) and in no other. The registry is shared,
// so someone else may point an entry elsewhere, remove it, or delete a
// whole shard: each is repaired (found by the e2e chaos suite's competing
// writer, scenario 4: nothing watched the registry, so such an entry stayed
// wrong until the WebApp itself changed). Deleting a WebApp removes its
// entry only.
func TestRegistryShards(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	mgr := startOperator(t, ns)
	cached := mgr.GetClient()
	a, b := appsInTwoShards(t, ns)
	for _, name := range []string{a, b} {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: webappv2Spec("registry.example.com/web:v1", 1)}
		require.NoError(t, env.Client.Create(ctx, app))
	}

	// entryIs reads the app's shard from the manager's cache.
	entryIs := func(app, value string, present bool) func() bool {
		return func() bool {
			cm := &corev1.ConfigMap{}
			if cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: controller.RegistryShard(ns, app)}, cm) != nil {
				return false
			}
			got, ok := cm.Data[controller.RegistryKey(ns, app)]
			return ok == present && got == value
		}
	}
	for _, app := range []string{a, b} {
		require.Eventually(t, entryIs(app, controller.RegistryValue(ns, app), true), 30*time.Second, 50*time.Millisecond,
			"%s was never registered in %s", app, controller.RegistryShard(ns, app))
	}
	// Each entry is in its own shard only. (The manager reconciles the
	// WebApps of every namespace, other tests' too: the shards hold more.)
	for app, other := range map[string]string{a: b, b: a} {
		cm := &corev1.ConfigMap{}
		require.NoError(t, cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: controller.RegistryShard(ns, other)}, cm))
		assert.NotContains(t, cm.Data, controller.RegistryKey(ns, app), "%s is not in %s's shard", app, other)
		assert.Equal(t, "shard", cm.Labels[controller.RegistryLabel], "%s is labelled", cm.Name)
	}
	// Drift repair needs the pass to have reached the register step
	// (DatabaseReady); it is reported at the end of the pass.
	require.Eventually(t, func() bool {
		w := &webappv2.WebApp{}
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a}, w) == nil && conditions.IsTrue(w, webappv2.DatabaseReady)
	}, 30*time.Second, 50*time.Millisecond)
	shard := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.RegistryShard(ns, a)}}
	entry := controller.RegistryKey(ns, a)
	want := controller.RegistryValue(ns, a)
	for _, drift := range []string{
		`{"data":{"` + entry + `":"http://hijacked.example.com"}}`, // pointed elsewhere
		`{"data":{"` + entry + `":null}}`,                          // removed
	} {
		require.NoError(t, env.Client.Patch(ctx, shard, client.RawPatch(types.MergePatchType, []byte(drift))))
		require.Eventually(t, entryIs(a, want, true), time.Minute, 50*time.Millisecond, "registry drift %s was not repaired", drift)
	}
	// A whole shard deleted: recreated with its entry.
	old := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(shard), old))
	require.NoError(t, env.Client.Delete(ctx, shard))
	require.Eventually(t, func() bool {
		cm := &corev1.ConfigMap{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(shard), cm) == nil && cm.UID != old.UID && cm.Data[entry] == want
	}, time.Minute, 50*time.Millisecond, "a deleted shard was not recreated with its entry")

	// Deleting a WebApp removes its entry from its shard; the other stays.
	require.NoError(t, env.Client.Delete(ctx, &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: a, Namespace: ns}}))
	require.Eventually(t, entryIs(a, "", false), 30*time.Second, 50*time.Millisecond, "the deleted WebApp's entry stayed")
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a}, &webappv2.WebApp{}))
	}, 30*time.Second, 50*time.Millisecond, "the WebApp was not deleted after its cleanup")
	require.True(t, entryIs(b, controller.RegistryValue(ns, b), true)(), "the other WebApp's entry survives")
}

// legacyRegistry is the single registry ConfigMap the previous version of
// the operator created (with its managed-by label) in ns.
func legacyRegistry(ns string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.LegacyRegistryName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "webapp-operator"}},
		Data: data,
	}
}

// TestLegacyRegistryMigrates: upgrading from the single-ConfigMap registry.
// Each WebApp's pass moves its entry into its shard; the legacy registry,
// once empty, is deleted, so it cannot keep routing to WebApps after they
// are gone.
func TestLegacyRegistryMigrates(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	a, b := appsInTwoShards(t, ns)
	require.NoError(t, env.Client.Create(ctx, legacyRegistry(ns, map[string]string{
		controller.RegistryKey(ns, a): controller.RegistryValue(ns, a),
		controller.RegistryKey(ns, b): controller.RegistryValue(ns, b),
	})))
	for _, name := range []string{a, b} {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: webappv2Spec("registry.example.com/web:v1", 1)}
		require.NoError(t, env.Client.Create(ctx, app))
	}
	mgr := startOperator(t, ns)

	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: controller.LegacyRegistryName}, &corev1.ConfigMap{}))
	}, 30*time.Second, 50*time.Millisecond, "the emptied legacy registry was not deleted")
	for _, app := range []string{a, b} {
		cm := &corev1.ConfigMap{}
		require.NoError(t, mgr.GetClient().Get(ctx, types.NamespacedName{Namespace: ns, Name: controller.RegistryShard(ns, app)}, cm))
		assert.Equal(t, controller.RegistryValue(ns, app), cm.Data[controller.RegistryKey(ns, app)], "%s moved to its shard", app)
	}
}

// TestLegacyRegistryDeregister: the legacy registry holds entries this
// operator does not own (kept), and a WebApp deleted during the upgrade
// (an entry the previous version wrote again, moments before it stopped)
// is removed from it too; the last entry gone, the legacy registry is
// deleted.
func TestLegacyRegistryDeregister(t *testing.T) {
	f := newFixture(t, webappv2Spec("registry.example.com/web:v1", 1))
	ctx, ns := f.ctx, f.ns
	key := types.NamespacedName{Namespace: ns, Name: controller.LegacyRegistryName}
	entry, want := controller.RegistryKey(ns, "shop"), controller.RegistryValue(ns, "shop")
	require.NoError(t, env.Client.Create(ctx, legacyRegistry(ns, map[string]string{entry: want, "other.app": "http://app.other.svc:80"})))
	f.reconcile()

	shard := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, f.shard(), shard))
	assert.Equal(t, want, shard.Data[entry], "moved to its shard")
	legacy := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, key, legacy))
	assert.Equal(t, map[string]string{"other.app": "http://app.other.svc:80"}, legacy.Data, "moved out of the legacy registry; the other entry stays")

	// The previous version wrote the entry again and dropped the other.
	require.NoError(t, env.Client.Patch(ctx, legacy, client.RawPatch(types.MergePatchType,
		[]byte(`{"data":{"`+entry+`":"`+want+`","other.app":null}}`))))
	require.NoError(t, env.Client.Delete(ctx, f.app()))
	f.reconcile()

	err := env.Client.Get(ctx, key, legacy)
	assert.True(t, apierrors.IsNotFound(err), "the emptied legacy registry is deleted: %v", err)
	require.NoError(t, env.Client.Get(ctx, f.shard(), shard))
	assert.NotContains(t, shard.Data, entry)
	err = env.Client.Get(ctx, f.req.NamespacedName, &webappv2.WebApp{})
	assert.True(t, apierrors.IsNotFound(err), "the WebApp is gone: %v", err)
}

// TestDeregisterWithLaggingCache: a WebApp deleted right after its pass
// registered it, while the cached registry does not show that entry yet.
// Found by the e2e chaos suite (scenario 4, creates and deletes under
// load): cleanup looked the key up in the cache, found nothing to remove,
// and dropped the finalizer, leaving an entry that routed to a deleted
// WebApp forever. The registry here trails by one version, every run.
func TestDeregisterWithLaggingCache(t *testing.T) {
	f := newFixture(t, webappv2Spec("registry.example.com/web:v1", 1))
	ctx, ns := f.ctx, f.ns
	f.useClient(reconcilertest.NewClient(f.m.Client,
		reconcilertest.WithCacheLag(f.m.Cache, cachelag.Lag{Kind: "ConfigMap", VersionsBehind: 1})))
	// The shard exists (another WebApp's entry), so registering is an
	// update of it, which the lag holds back.
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: f.shard().Name},
		Data:       map[string]string{"other.app": "http://app.other.svc:80"},
	}))
	f.reconcile()
	reg := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, f.shard(), reg))
	require.Contains(t, reg.Data, ns+".shop", "registered")

	require.NoError(t, env.Client.Delete(ctx, f.app()))
	f.reconcile()

	require.NoError(t, env.Client.Get(ctx, f.shard(), reg))
	require.NotContains(t, reg.Data, ns+".shop", "the entry of the deleted WebApp is removed")
	require.Equal(t, "http://app.other.svc:80", reg.Data["other.app"], "the other WebApp's entry survives")
	err := env.Client.Get(ctx, f.req.NamespacedName, &webappv2.WebApp{})
	require.True(t, apierrors.IsNotFound(err), "the WebApp is gone: %v", err)
}

// TestRegistryShardIsStable pins the shard function: gateways and the
// bench compute it too, and changing it would strand every entry in a
// shard no WebApp writes any more.
func TestRegistryShardIsStable(t *testing.T) {
	names := controller.RegistryShardNames()
	require.Len(t, names, controller.RegistryShards)
	assert.Equal(t, "webapp-registry-00", names[0])
	assert.Equal(t, "webapp-registry-15", names[15])
	// fnv-32a("default/shop") = 0x9d8d294f; mod 16 = 15.
	assert.Equal(t, "webapp-registry-15", controller.RegistryShard("default", "shop"))
	for _, name := range names {
		assert.True(t, controller.IsShard(name), name)
	}
	for _, name := range []string{"webapp-registry", "webapp-registry-16", "webapp-registry-+1", "webapp-registry-7", "webapp-registry-007", "other-00"} {
		assert.False(t, controller.IsShard(name), name)
	}
	used := map[string]bool{}
	for i := range 1000 {
		used[controller.RegistryShard("team", fmt.Sprintf("app-%d", i))] = true
	}
	assert.Len(t, used, controller.RegistryShards, "1,000 WebApps use every shard")
}

// maxConfigMapData is the apiserver's limit on a ConfigMap's data: the sum
// of its keys' and values' lengths (validation's MaxSecretSize, 1 MiB).
const maxConfigMapData = 1 << 20

// TestRegistryShardCapacity: the single registry ConfigMap passed the 1 MiB
// limit at about 10,000 WebApps. With 10,000 WebApps the largest shard
// stays far below it, computed from the entries the operator writes (the
// apiserver's measure), for realistic names and for the longest names a
// registered WebApp can have (63 characters each: its Service and its
// instance label carry the name).
func TestRegistryShardCapacity(t *testing.T) {
	const apps = 10000
	for _, tc := range []struct {
		name      string
		namespace func(i int) string
		app       func(i int) string
	}{
		{"realistic names", func(i int) string { return fmt.Sprintf("team-%03d", i%100) }, func(i int) string { return fmt.Sprintf("shop-frontend-%05d", i) }},
		{"63-character names", func(i int) string { return fmt.Sprintf("%s%05d", strings.Repeat("n", 58), i%100) }, func(i int) string { return fmt.Sprintf("%s%05d", strings.Repeat("a", 58), i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := map[string]int{}
			count := map[string]int{}
			entry := 0
			for i := range apps {
				ns, name := tc.namespace(i), tc.app(i)
				entry = len(controller.RegistryKey(ns, name)) + len(controller.RegistryValue(ns, name))
				shard := controller.RegistryShard(ns, name)
				size[shard] += entry
				count[shard]++
			}
			largest, most := 0, 0
			for shard := range size {
				largest, most = max(largest, size[shard]), max(most, count[shard])
			}
			single := entry * apps
			t.Logf("%d WebApps, %d bytes an entry: one ConfigMap would hold %d bytes (%.0f%% of 1 MiB); the largest of %d shards holds %d entries, %d bytes (%.1f%% of 1 MiB); 16 shards hold about %d such WebApps",
				apps, entry, single, 100*float64(single)/maxConfigMapData, len(size), most, largest, 100*float64(largest)/maxConfigMapData,
				controller.RegistryShards*maxConfigMapData/entry)
			require.Len(t, size, controller.RegistryShards, "every shard is used")
			assert.Less(t, largest, maxConfigMapData/4, "the largest shard stays under a quarter of the limit")
			assert.Less(t, most, apps/controller.RegistryShards*5/4, "the shards are balanced within 25%")
		})
	}
}

// TestRBACNamesEveryShard: the +kubebuilder:rbac marker lists the shards'
// names by hand (markers are literals); the generated role must grant
// patch on exactly RegistryShardNames, and list/watch/create only in the
// operator's namespace.
func TestRBACNamesEveryShard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(crdDir(), "..", "..", "rbac", "role.yaml"))
	require.NoError(t, err)
	var patchNames []string
	var namespaced []rbacv1.PolicyRule
	for doc := range strings.SplitSeq(string(raw), "\n---\n") {
		var role rbacv1.Role
		require.NoError(t, yaml.Unmarshal([]byte(doc), &role))
		for _, rule := range role.Rules {
			if !strings.Contains(strings.Join(rule.Resources, ","), "configmaps") {
				continue
			}
			require.Equal(t, "Role", role.Kind, "ConfigMaps are granted in the operator's namespace only")
			namespaced = append(namespaced, rule)
			if len(rule.ResourceNames) > 1 {
				assert.Equal(t, []string{"patch"}, rule.Verbs)
				patchNames = rule.ResourceNames
			}
		}
	}
	assert.Equal(t, controller.RegistryShardNames(), patchNames)
	assert.Len(t, namespaced, 3, "shards by name, the legacy registry by name, and create/list/watch")
}

// TestDeletedWhileTheFinalizerWasAdded: the API server deletes a WebApp
// at once, finalizer or not, when the DELETE read it before the first
// pass added the finalizer; no deleting copy ever reaches a pass, so
// deregister never ran and the entry the pass registered stayed (e2e
// chaos scenario 4: "the route registry still holds ...app-001 for a
// WebApp that does not exist", written by the operator, no
// CleanupSucceeded event). The informer's delete event carries the last
// state, finalizer included; the pass that follows runs the cleanup on it.
// The race inside the API server is not reproducible on demand: the object
// is made to vanish by the test, and the event is delivered as the
// informer delivers it. TestCreateAndDeleteAtOnce provokes the race itself.
func TestDeletedWhileTheFinalizerWasAdded(t *testing.T) {
	f := newFixture(t, webappv2Spec("registry.example.com/web:v1", 1))
	ctx := f.ctx
	f.reconcile()
	reg := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, f.shard(), reg))
	require.Contains(t, reg.Data, f.ns+".shop", "registered")
	last := f.app()
	require.Contains(t, last.Finalizers, controller.Finalizer)

	// Gone without a pass ever seeing it deleting.
	require.NoError(t, env.Client.Patch(ctx, f.app(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
	require.NoError(t, env.Client.Delete(ctx, f.app()))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r := f.r.(*reconciler.Reconciler[*webappv2.WebApp])
	r.DeletedWithFinalizer().Delete(ctx, event.DeleteEvent{Object: last}, q)
	require.Equal(t, 1, q.Len(), "the deleted WebApp is queued")
	f.reconcile()

	require.NoError(t, env.Client.Get(ctx, f.shard(), reg))
	require.NotContains(t, reg.Data, f.ns+".shop", "the entry of the WebApp deleted with its finalizer is removed")
}

// TestCreateAndDeleteAtOnce runs the operator as main.go does while
// WebApps are created and deleted right away, as the e2e chaos workload
// does: none may leave an entry behind. A DELETE that reads a WebApp
// before the first pass adds the finalizer deletes it anyway
// (TestDeletedWhileTheFinalizerWasAdded); without the cleanup of such
// WebApps about one run in two left an entry here.
func TestCreateAndDeleteAtOnce(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	startOperator(t, ns)
	for i := range 60 {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%03d", i), Namespace: ns}, Spec: webappv2Spec("registry.example.com/web:v1", 1)}
		require.NoError(t, env.Client.Create(ctx, app))
		// Deletes land before, during and after the first pass.
		time.Sleep(time.Duration(i%6) * 15 * time.Millisecond)
		require.NoError(t, client.IgnoreNotFound(env.Client.Delete(ctx, app)))
	}
	require.Eventually(t, func() bool {
		l := &webappv2.WebAppList{}
		require.NoError(t, env.Client.List(ctx, l, client.InNamespace(ns)))
		return len(l.Items) == 0
	}, 60*time.Second, 100*time.Millisecond, "the WebApps were never all deleted")
	// The cleanup of the last WebApp may still be running: wait for every
	// entry to go, then name those left.
	entries := func() []string {
		l := &corev1.ConfigMapList{}
		require.NoError(t, env.Client.List(ctx, l, client.InNamespace(ns)))
		var left []string
		for _, cm := range l.Items {
			for k := range cm.Data {
				// The manager also serves other tests' namespaces.
				if strings.HasPrefix(k, ns+".") {
					left = append(left, cm.Name+": "+k)
				}
			}
		}
		return left
	}
	assert.Eventually(t, func() bool { return len(entries()) == 0 }, time.Minute, 100*time.Millisecond)
	assert.Empty(t, entries(), "entries left in the registry for deleted WebApps")
}
