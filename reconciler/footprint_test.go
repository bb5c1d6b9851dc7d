package reconciler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// unboundedInformers reads reconcilekit_unbounded_cache_informers{kind}
// from controller-runtime's registry, the one the manager's endpoint serves.
func unboundedInformers(t *testing.T, kind string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != "reconcilekit_unbounded_cache_informers" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("reconcilekit_unbounded_cache_informers{kind=%q} is not registered", kind)
	return 0
}

// logLines collects what a logr.Logger logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// readThroughGuardedCache starts a manager whose cache options are opts
// guarded by CacheOptions, reads obj's kind through its cached
// client (which starts the kind's informer, as a controller's watch
// would), and returns what the guard logged and by how much it raised the
// Secret gauge.
func readThroughGuardedCache(t *testing.T, opts cache.Options, obj client.Object) ([]string, float64) {
	t.Helper()
	var logged logLines
	restore := reconciler.SetFootprintLog(logged.logger())
	guarded := reconciler.CacheOptions(opts)
	restore()

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   guarded,
	})
	require.NoError(t, err)
	// RunManager returns once the cache has started: a read before that
	// fails ("the cache is not started").
	ctx := testenv.RunManager(t, mgr)

	before := unboundedInformers(t, "Secret")
	readCtx, readCancel := context.WithTimeout(ctx, time.Minute)
	defer readCancel()
	require.NoError(t, mgr.GetClient().Get(readCtx, client.ObjectKeyFromObject(obj), obj))
	return logged.get(), unboundedInformers(t, "Secret") - before
}

// TestCacheOptionsGuardsTheFootprint: a manager whose cache would hold every Secret in
// the cluster warns, in the log and the gauge, when it starts the Secret
// informer; one that bounds Secrets by label or namespace, or reads them
// metadata-only, is silent.
func TestCacheOptionsGuardsTheFootprint(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	managed := map[string]string{"app.kubernetes.io/managed-by": "footprint-test"}
	key := types.NamespacedName{Namespace: ns, Name: "s"}
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name, Labels: managed}}))
	secret := func() client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}
	}

	t.Run("cluster-wide", func(t *testing.T) {
		logged, raised := readThroughGuardedCache(t, cache.Options{}, secret())
		assert.Equal(t, 1.0, raised, "one unbounded Secret informer")
		require.Len(t, logged, 1)
		assert.Contains(t, logged[0], `"kind"="Secret"`)
		assert.Contains(t, logged[0], "cache.Options.ByObject")
	})

	silent := map[string]struct {
		opts cache.Options
		obj  client.Object
	}{
		"label selector": {cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(managed)},
		}}, secret()},
		"namespaces": {cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{ns: {}}},
		}}, secret()},
		"metadata-only": {cache.Options{}, func() client.Object {
			m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
			return m
		}()},
	}
	for name, tc := range silent {
		t.Run(name, func(t *testing.T) {
			logged, raised := readThroughGuardedCache(t, tc.opts, tc.obj)
			assert.Zero(t, raised)
			assert.Empty(t, logged)
		})
	}
}
