package reconciler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrl "sigs.k8s.io/controller-runtime"
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
	require.Eventually(t, func() bool { return widgetGone(t, f) }, 10*time.Second, 20*time.Millisecond)
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
	})
	require.NoError(t, err)
	r.Builder(mgr)
	_, ok := findSeries(t, "reconcilekit_noop_passes_total", map[string]string{"controller": name})
	assert.True(t, ok, "no-op passes")
	for _, step := range []string{"a", "b", "c"} {
		for _, typ := range []string{"transient", "terminal", "panic"} {
			_, ok := findSeries(t, "reconcilekit_step_errors_total", map[string]string{"controller": name, "step": step, "type": typ})
			assert.True(t, ok, "step %s, %s errors", step, typ)
		}
	}
}
