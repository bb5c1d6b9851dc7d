package reconciler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// gauge returns the value of the gauge name{controller=controller} in
// controller-runtime's registry, the one the manager's endpoint serves, and
// whether that series exists.
func gauge(t *testing.T, name, controller string) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestStalledObjectsGauge: reconcilekit_stalled_objects counts the live
// objects left Stalled=True, once each however many passes see them, and
// drops them when they recover or are gone. It exists (0) before any pass,
// so an alert on it never sees "no data".
func TestStalledObjectsGauge(t *testing.T) {
	const name = "reconcilekit_stalled_objects"
	var broken atomic.Bool
	broken.Store(true)
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps: []widgetStep{{Name: "image", Condition: "ImageReady", Run: func(context.Context, *scope) reconciler.Outcome {
			if broken.Load() {
				return reconciler.Terminal("ImageInvalid", errors.New("no such image"))
			}
			return reconciler.Continue()
		}}},
	})
	v, ok := gauge(t, name, f.opts.Name)
	require.True(t, ok, "the series exists from New on")
	assert.Zero(t, v)

	for pass := 1; pass <= 2; pass++ {
		_, err := f.reconcile()
		require.Error(t, err)
		require.True(t, conditions.IsTrue(f.get(), conditions.Stalled))
		v, _ = gauge(t, name, f.opts.Name)
		assert.Equal(t, 1.0, v, "pass %d: one Stalled object, counted once", pass)
	}

	broken.Store(false)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.False(t, conditions.IsTrue(f.get(), conditions.Stalled))
	v, _ = gauge(t, name, f.opts.Name)
	assert.Zero(t, v, "fixed: no longer counted")

	broken.Store(true)
	_, err = f.reconcile()
	require.Error(t, err)
	v, _ = gauge(t, name, f.opts.Name)
	require.Equal(t, 1.0, v)
	w := f.get()
	require.NoError(t, env.Client.Delete(f.ctx, w))
	require.Eventually(t, func() bool { return widgetGone(t, f) }, time.Minute, 20*time.Millisecond, "the deleted Widget is gone")
	_, err = f.reconcile()
	require.NoError(t, err)
	v, _ = gauge(t, name, f.opts.Name)
	assert.Zero(t, v, "a deleted object is not Stalled")
}

// TestCleanupOverdueGauge: reconcilekit_cleanup_overdue_objects counts a
// deleting object whose cleanup holds the finalizer past CleanupDeadline,
// not one within it, and drops it once cleanup succeeds.
func TestCleanupOverdueGauge(t *testing.T) {
	const name = "reconcilekit_cleanup_overdue_objects"
	for _, tt := range []struct {
		name     string
		deadline time.Duration
		want     float64
	}{
		{"past the deadline", time.Nanosecond, 1},
		{"within the deadline", time.Hour, 0},
		{"without a deadline", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var done atomic.Bool
			f := newFixture(t, reconciler.Options[*testv1.Widget]{
				Finalizer:       cleanupFinalizer,
				CleanupDeadline: tt.deadline,
				Cleanup: []widgetStep{{Name: "delete-bucket", Run: func(context.Context, *scope) reconciler.Outcome {
					if done.Load() {
						return reconciler.Continue()
					}
					return reconciler.Wait("BucketNotEmpty", "%d objects left", 3)
				}}},
			})
			startDeletion(t, f)
			for pass := 1; pass <= 2; pass++ {
				_, err := f.reconcile()
				require.NoError(t, err)
				require.True(t, controllerutil.ContainsFinalizer(f.get(), cleanupFinalizer))
				v, ok := gauge(t, name, f.opts.Name)
				require.True(t, ok)
				assert.Equal(t, tt.want, v, "pass %d", pass)
			}
			done.Store(true)
			_, err := f.reconcile()
			require.NoError(t, err)
			require.True(t, widgetGone(t, f))
			v, _ := gauge(t, name, f.opts.Name)
			assert.Zero(t, v, "cleaned up")
		})
	}
}

// findSeries finds the series of name in controller-runtime's registry
// that has at least the given labels: its value as a counter, and whether
// it exists.
func findSeries(t *testing.T, name string, labels map[string]string) (counter float64, ok bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// TestCountersExistAtZero: once set up under a manager, a controller's
// counters exist before anything counted (a dashboard's rate() over them
// shows 0, not "no data"): no-op passes, and the errors of every step and
// cleanup step, of each type.
func TestCountersExistAtZero(t *testing.T) {
	testenv.Require(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	const name = "zero-counters"
	noop := func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }
	r, err := reconciler.New(mgr, reconciler.Options[*testv1.Widget]{Name: name,
		Steps:     []widgetStep{{Name: "a", Run: noop}, {Name: "b", Run: noop}},
		Finalizer: "test.reconcilekit.io/zero", Cleanup: []widgetStep{{Name: "c", Run: noop}},
		Owns: []client.Object{&corev1.ConfigMap{}},
	})
	require.NoError(t, err)
	r.Builder(mgr)
	_, ok := findSeries(t, "reconcilekit_noop_passes_total", map[string]string{"controller": name})
	assert.True(t, ok, "no-op passes")
	_, ok = findSeries(t, "reconcilekit_status_writes_total", map[string]string{"controller": name})
	assert.True(t, ok, "status writes")
	for _, result := range []string{"created", "updated", "unchanged"} {
		_, ok := findSeries(t, "reconcilekit_applies_total", map[string]string{"controller": name, "kind": "ConfigMap", "result": result})
		assert.True(t, ok, "%s applies", result)
	}
	for _, step := range []string{"a", "b", "c"} {
		for _, typ := range []string{"transient", "terminal", "panic"} {
			_, ok := findSeries(t, "reconcilekit_step_errors_total", map[string]string{"controller": name, "step": step, "type": typ})
			assert.True(t, ok, "step %s, %s errors", step, typ)
		}
	}
}

// reconcilekit_applies_total counts every Scope.Apply by its result, and
// reconcilekit_status_writes_total every status write: a Widget's first
// pass creates its ConfigMap and writes its conditions; the passes after
// it find the ConfigMap unchanged and write no status, until the ConfigMap
// is edited by hand and the next pass repairs it.
func TestAppliesAndStatusWritesAreCounted(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	var passes atomic.Int32
	name := startWidgetController(t, ns, reconciler.Options[*testv1.Widget]{
		Owns: []client.Object{&corev1.ConfigMap{}},
		Steps: []widgetStep{{Name: "config", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			defer passes.Add(1)
			cm := corev1ac.ConfigMap(s.Object.Name+"-config", s.Object.Namespace).WithData(map[string]string{"k": "v"})
			if _, err := s.Apply(ctx, cm); err != nil {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		}}},
	})
	applied := func(result string) float64 {
		return counter(t, "reconcilekit_applies_total", name, "kind", "ConfigMap", "result", result)
	}
	statusWrites := func() float64 { return counter(t, "reconcilekit_status_writes_total", name) }
	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}}))
	// The ConfigMap's create event starts a second pass, which finds it
	// unchanged.
	require.Eventually(t, func() bool { return applied("created") == 1 && applied("unchanged") >= 1 },
		30*time.Second, 10*time.Millisecond, "the first pass did not create the ConfigMap, or no pass followed")
	writes, unchanged, before := statusWrites(), applied("unchanged"), passes.Load()
	assert.GreaterOrEqual(t, writes, 1.0, "the first pass wrote the Widget's conditions")

	// A pass over the converged Widget: an annotation changes nothing a
	// step reads.
	w := &testv1.Widget{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, w))
	w.Annotations = map[string]string{"touched": "1"}
	require.NoError(t, env.Client.Update(ctx, w))
	require.Eventually(t, func() bool { return passes.Load() > before && applied("unchanged") > unchanged },
		30*time.Second, 10*time.Millisecond, "no pass after the annotation")
	assert.Equal(t, unchanged+float64(passes.Load()-before), applied("unchanged"), "one unchanged apply per pass")
	assert.Equal(t, writes, statusWrites(), "a converged pass writes no status")

	// The ConfigMap edited by hand: the next pass applies it again.
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w-config"}, cm))
	cm.Data["k"] = "edited"
	require.NoError(t, env.Client.Update(ctx, cm))
	require.Eventually(t, func() bool { return applied("updated") == 1 }, 30*time.Second, 10*time.Millisecond, "the drift was not repaired")
	assert.Equal(t, 1.0, applied("created"))
}
