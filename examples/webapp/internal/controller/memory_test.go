package controller_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

// TestServiceCacheMemory measures what Services the operator does not own
// cost its caches. Before: one typed informer of every Service in the
// cluster (Owns and the database watch shared it), managedFields
// stripped. After: the typed Service informer selects the managed-by
// label (controller.CacheOptions), and the database step's metadata-only
// cache (reconciler.WaitFor) keeps each Service's name, namespace and
// version, from the first WebApp that names a database on; "after" is what
// a manager as main.go builds it grows by for the WebApp reconciler (its
// Service caches) with a WebApp naming a database, and "unused" the same
// with no WebApp naming one (no Service is cached then). The heap is
// read after a GC with the caches synced, minus the heap before they
// started, in signed arithmetic: a heap that shrank reads as a negative
// growth, never as an unsigned wrap-around that would pass or fail the
// comparison by accident. The "before" figure must be at least
// minServiceBytes a Service, so a measurement that did not see the
// caches cannot pass. WEBAPP_MEMORY_SERVICES sets the number of unrelated
// Services (default 1000; the figures in the docs are from 5000).
func TestServiceCacheMemory(t *testing.T) {
	testenv.Require(t)
	n := 1000
	if v := os.Getenv("WEBAPP_MEMORY_SERVICES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	ctx := context.Background()
	ns := env.Namespace(t)
	createServices(t, ns, n)

	// newManager is a manager as main.go builds it, for the caches'
	// connection and, after, for the caches themselves.
	newManager := func(opts cache.Options) manager.Manager {
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Cache: opts,
			Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: new(true)}})
		require.NoError(t, err)
		return mgr
	}
	// heapGrowth starts run, waits until ready says the caches are
	// synced, and returns how much the live heap grew.
	heapGrowth := func(run func(context.Context) error, ready func() bool) int64 {
		base := liveHeap()
		runCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() { _ = run(runCtx) })
		// A safety net: the caches list every Service and, with a WebApp
		// naming a database, the reconciler finds it, which a loaded
		// machine may take a while to do.
		require.Eventually(t, ready, 3*time.Minute, 100*time.Millisecond, "the caches did not sync, or the WebApp's DatabaseReady did not say what was waited for")
		return liveHeap() - base // signed: it may shrink
	}

	mgr := newManager(cache.Options{})
	before, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultTransform: cache.TransformStripManagedFields()})
	require.NoError(t, err)
	_, err = before.GetInformer(ctx, &corev1.Service{})
	require.NoError(t, err)
	old := heapGrowth(before.Start, func() bool {
		var list corev1.ServiceList
		return before.List(ctx, &list, client.InNamespace(ns)) == nil && len(list.Items) == n
	})
	before = nil

	// After: a manager as main.go builds it, with the typed Service
	// informer (CacheOptions) and the database step's metadata-only cache,
	// minus the same manager without the WebApp reconciler (its fixed
	// cost). ready says when to read the heap: the caches are synced and,
	// with a WebApp naming a database, it has found it (the metadata-only
	// cache has listed every Service).
	startManager := func(withReconciler bool, ready func() bool) int64 {
		opts := controller.CacheOptions(ns)
		// The WebApps of this test only: the operator's own cache holds
		// every namespace's, but here the others are what earlier tests
		// (and earlier runs, with -count) left, and the reconciler's
		// passes over them, running while the heap is read, made "after"
		// vary from 760 KiB to 2 MiB. The Service caches measured are the
		// operator's: every namespace's.
		opts.ByObject[&webappv2.WebApp{}] = cache.ByObject{Namespaces: map[string]cache.Config{ns: {}}}
		mgr := newManager(opts)
		if withReconciler {
			_, err := controller.Setup(mgr, ns, nil)
			require.NoError(t, err)
		}
		for _, o := range []client.Object{&corev1.Service{}, &webappv2.WebApp{}} {
			_, err := mgr.GetCache().GetInformer(ctx, o)
			require.NoError(t, err)
		}
		var synced atomic.Bool
		require.NoError(t, mgr.Add(manager.RunnableFunc(func(context.Context) error {
			synced.Store(true)
			return nil
		})))
		grown := heapGrowth(mgr.Start, func() bool { return synced.Load() && ready() })
		runtime.KeepAlive(mgr)
		return grown
	}
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: webappv2Spec("registry.example.com/web:v1", 1)}
	require.NoError(t, env.Client.Create(ctx, app))
	databaseReady := func(reason string) func() bool {
		return func() bool {
			got := &webappv2.WebApp{}
			if env.Client.Get(ctx, client.ObjectKeyFromObject(app), got) != nil {
				return false
			}
			c := meta.FindStatusCondition(got.Status.Conditions, webappv2.DatabaseReady)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
		}
	}
	// The first run loads what a process loads once (the built-in kinds'
	// schemas, the first apply's); the next one, over the same converged
	// WebApp naming no database, is the one compared.
	startManager(true, databaseReady(reconciler.ReasonNotConfigured))
	unused := startManager(true, databaseReady(reconciler.ReasonNotConfigured))
	fixed := startManager(false, func() bool { return true })

	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(app), app))
	app.Spec.Database = &webappv2.DatabaseReference{ServiceName: "unrelated-00000"}
	require.NoError(t, env.Client.Update(ctx, app))
	now := startManager(true, databaseReady("DatabaseFound")) - unused

	t.Logf("%d unrelated Services: caches grew %d KiB before (%d bytes a Service), %d KiB after (%d bytes a Service): %.1f%%; "+
		"the controller without a WebApp naming a database: %d KiB (no Service cached)",
		n, old>>10, old/int64(n), now>>10, now/int64(n), 100*float64(now)/float64(old), (unused-fixed)>>10)
	require.GreaterOrEqual(t, old, minServiceBytes*int64(n),
		"the typed cache of every Service grew the heap by less than %d bytes a Service: the measurement did not see it", minServiceBytes)
	require.Positive(t, now, "the metadata-only cache of every Service did not grow the heap: the measurement did not see it")
	// Half, not less: "after" includes what the controller's watch of the
	// Services holds besides them (about 200 KiB: its handler's buffer of
	// the initial creates), which the figure of 1,000 Services shows most.
	assert.Less(t, now, old/2, "unrelated Services cost the caches less than half of what they did")
}

// createServices creates n headless Services (envtest's Service CIDR has
// 254 addresses) in ns, as a team's unrelated workloads would have them,
// and deletes them when t ends: the "before" cache holds every Service of
// the cluster, and envtest deletes no namespace, so a second run (-count)
// would measure the first one's Services too.
func createServices(t *testing.T, ns string, n int) {
	t.Helper()
	t.Cleanup(func() {
		eachService(t, n, func(ctx context.Context, name string) error {
			return client.IgnoreNotFound(env.Client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
		})
		var list corev1.ServiceList
		require.NoError(t, env.Client.List(context.Background(), &list, client.InNamespace(ns),
			client.MatchingLabels{"app.kubernetes.io/part-of": "storefront"}))
		require.Empty(t, list.Items, "unrelated Services left in %s after the test", ns)
	})
	eachService(t, n, func(ctx context.Context, name string) error {
		return env.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels: map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "storefront"}},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app.kubernetes.io/name": name},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		})
	})
}

// eachService calls do for the names of n Services, eight at a time.
func eachService(t *testing.T, n int, do func(ctx context.Context, name string) error) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				errs <- do(ctx, fmt.Sprintf("unrelated-%05d", i))
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// minServiceBytes is a floor on what a typed Service in an informer's store
// costs the heap (about 1,900 bytes measured): its ObjectMeta, spec and
// ports alone are larger.
const minServiceBytes = 512

// liveHeap is the heap in use after a full collection, signed so that
// readings subtract without wrapping.
func liveHeap() int64 {
	var m runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc) //nolint:gosec // a heap is far below 2^63 bytes
}
