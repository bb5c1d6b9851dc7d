package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// counter returns the value of the counter name{controller, extra labels}
// in controller-runtime's registry (0 when the series does not exist).
func counter(t *testing.T, name, controller string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{"controller": controller}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	v, _ := findSeries(t, name, want)
	return v
}

func skipped(t *testing.T, controller, cause string) float64 {
	t.Helper()
	return counter(t, "reconcilekit_skipped_wakeups_total", controller, "cause", cause)
}

// startWidgetController runs a reconciler for the Widgets of namespace ns
// under a manager, set up by Builder as SetupWithManager does, and returns
// its controller name. The name ends with ns, new in each run: the metrics
// are the process's, and a test run again (-count) must not count its
// earlier runs' passes.
func startWidgetController(t *testing.T, ns string, opts reconciler.Options[*testv1.Widget]) string {
	t.Helper()
	opts.Name = "wakeups-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + ns
	env.StartManager(t, func(mgr manager.Manager) error {
		r, err := reconciler.New(mgr, opts)
		if err != nil {
			return err
		}
		return r.Builder(mgr).WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == ns
		})).Complete(r)
	})
	return opts.Name
}

// A Widget waiting on its Deployment's rollout is not run again for each
// status update of the Deployment that leaves it in progress (the
// Deployment controller writes several per rollout): those updates are
// held back and start one pass Options.RolloutProgressInterval later (here
// an hour: none), while the update that ends the rollout makes the Widget
// Ready as soon as without the filter. With a short interval the updates
// held back start a pass of their own, without another event; with a
// negative one each of them starts a pass, as in plain controller-runtime.
// envtest has no Deployment controller: the test writes the Deployment's
// status itself.
func TestRolloutProgressIsCoalesced(t *testing.T) {
	for mode, interval := range map[string]time.Duration{"held back": time.Hour, "refreshed": 3 * time.Second, "every event": -1} {
		t.Run(mode, func(t *testing.T) {
			testenv.Require(t)
			ctx := context.Background()
			ns := env.Namespace(t)
			var passes atomic.Int32
			name := startWidgetController(t, ns, reconciler.Options[*testv1.Widget]{
				Owns:                    []client.Object{&appsv1.Deployment{}},
				RolloutProgressInterval: interval,
				Steps: []widgetStep{{Name: "deployment", Condition: "Available", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
					passes.Add(1)
					return s.ApplyAndWait(ctx, testDeployment(s.Object, "example.com/app:v1"), nil)
				}}},
			})
			require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}}))
			key := client.ObjectKey{Namespace: ns, Name: "w"}
			// The pass of the create applies the Deployment; its create
			// event starts a second pass, which waits again and writes
			// nothing (counted once it has ended).
			require.Eventually(t, func() bool {
				w := &testv1.Widget{}
				return env.Client.Get(ctx, key, w) == nil && conditions.IsTrue(w, conditions.Reconciling) &&
					counter(t, "reconcilekit_noop_passes_total", name) >= 1
			}, 30*time.Second, 10*time.Millisecond, "the Widget never waited on its Deployment")
			require.Equal(t, int32(2), passes.Load(), "the create's pass and the Deployment's create event's")
			base, skippedBase := passes.Load(), skipped(t, name, "rollout-progress")

			// Three status updates that leave the rollout in progress, as
			// the Deployment controller writes them. Each is followed by a
			// pass or counted as dropped before the next.
			for i, st := range []appsv1.DeploymentStatus{
				{Replicas: 0},                     // Replicas: 0/1
				{Replicas: 1},                     // Updated: 0/1
				{Replicas: 1, UpdatedReplicas: 1}, // Available: 0/1
			} {
				before, skippedBefore := passes.Load(), skipped(t, name, "rollout-progress")
				d := &appsv1.Deployment{}
				require.NoError(t, env.Client.Get(ctx, key, d))
				st.ObservedGeneration = d.Generation
				d.Status = st
				require.NoError(t, env.Client.Status().Update(ctx, d))
				require.Eventually(t, func() bool {
					return passes.Load() > before || skipped(t, name, "rollout-progress") > skippedBefore
				}, 30*time.Second, 10*time.Millisecond, "status update %d: neither a pass nor a dropped wake-up", i)
			}
			if mode == "refreshed" {
				require.Eventually(t, func() bool { return passes.Load() > base }, 30*time.Second, 10*time.Millisecond,
					"the updates held back never started a pass")
			}
			progress, dropped := passes.Load()-base, skipped(t, name, "rollout-progress")-skippedBase

			// The update that ends the rollout starts the pass that makes
			// the Widget Ready.
			d := &appsv1.Deployment{}
			require.NoError(t, env.Client.Get(ctx, key, d))
			markRolledOut(t, ctx, d, nil)
			require.Eventually(t, func() bool {
				w := &testv1.Widget{}
				return env.Client.Get(ctx, key, w) == nil && conditions.IsTrue(w, conditions.Ready)
			}, 30*time.Second, 10*time.Millisecond, "the end of the rollout never made the Widget Ready")

			switch mode {
			case "every event":
				assert.Equal(t, int32(3), progress, "a pass per status update")
				assert.Zero(t, dropped)
			case "held back":
				assert.Zero(t, progress, "no pass while the rollout is in progress")
				assert.Equal(t, 3.0, dropped, "every in-progress status update held back, and counted")
			case "refreshed":
				assert.Positive(t, progress, "the updates held back start a pass without another event")
				assert.Less(t, progress, int32(3), "fewer passes than updates")
				assert.Positive(t, dropped)
			}
		})
	}
}

// The watch events of a pass's own writes (here the finalizer it adds and
// its status write) start no pass: a converged Widget is reconciled once.
// A write by someone else still starts one.
func TestOwnWritesDoNotWakeTheObject(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	var passes atomic.Int32
	name := startWidgetController(t, ns, reconciler.Options[*testv1.Widget]{
		Finalizer: "test.reconcilekit.io/cleanup",
		Cleanup: []widgetStep{{Name: "cleanup", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Continue()
		}}},
		Steps: []widgetStep{{Name: "note", Condition: "Noted", Run: func(_ context.Context, s *scope) reconciler.Outcome {
			passes.Add(1)
			s.Object.Status.Note = "size " + s.Object.Annotations["size"]
			return reconciler.Continue()
		}}},
	})
	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}}))
	key := client.ObjectKey{Namespace: ns, Name: "w"}
	require.Eventually(t, func() bool { return skipped(t, name, "own-write") >= 2 }, 30*time.Second, 10*time.Millisecond,
		"the events of the finalizer's and the status's writes were not dropped")
	w := &testv1.Widget{}
	require.NoError(t, env.Client.Get(ctx, key, w))
	require.True(t, conditions.IsTrue(w, conditions.Ready))
	assert.Equal(t, int32(1), passes.Load(), "the create's pass only")
	assert.Equal(t, 2.0, skipped(t, name, "own-write"))
	assert.Zero(t, counter(t, "reconcilekit_noop_passes_total", name), "the one pass wrote")

	// Someone else's write starts a pass, and its status write again none.
	w.Annotations = map[string]string{"size": "2"}
	require.NoError(t, env.Client.Update(ctx, w))
	require.Eventually(t, func() bool {
		return env.Client.Get(ctx, key, w) == nil && w.Status.Note == "size 2" && skipped(t, name, "own-write") >= 3
	}, 30*time.Second, 10*time.Millisecond, "the foreign write started no pass, or its status write was not dropped")
	assert.Equal(t, int32(2), passes.Load())

	// A foreign write the pass has nothing to do for: a no-op pass.
	w.Labels = map[string]string{"team": "a"}
	require.NoError(t, env.Client.Update(ctx, w))
	require.Eventually(t, func() bool { return counter(t, "reconcilekit_noop_passes_total", name) == 1 }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, int32(3), passes.Load())
}

// The wake-up filter remembers a pass's writes only until their watch
// events arrive: once a fleet has converged (finalizer, owned object,
// status, each written and seen), it holds none, whatever the fleet's
// size.
func TestConvergedFleetLeavesNoRememberedWrites(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const n = 20
	var r *reconciler.Reconciler[*testv1.Widget]
	env.StartManager(t, func(mgr manager.Manager) error {
		var err error
		r, err = reconciler.New(mgr, reconciler.Options[*testv1.Widget]{
			Name:      "wakeups-remembered",
			Finalizer: "test.reconcilekit.io/cleanup",
			Cleanup: []widgetStep{{Name: "cleanup", Run: func(context.Context, *scope) reconciler.Outcome {
				return reconciler.Continue()
			}}},
			Owns:  []client.Object{&corev1.ConfigMap{}},
			Steps: []widgetStep{applyConfigStep()},
		})
		if err != nil {
			return err
		}
		return r.Builder(mgr).WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == ns
		})).Complete(r)
	})
	for i := range n {
		require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i), Namespace: ns}}))
	}
	require.Eventually(t, func() bool {
		var list testv1.WidgetList
		if env.Client.List(ctx, &list, client.InNamespace(ns)) != nil || len(list.Items) != n {
			return false
		}
		for i := range list.Items {
			if !conditions.IsTrue(&list.Items[i], conditions.Ready) {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "the Widgets did not converge")
	// Before the fix, the apply that created an owned object stayed
	// remembered when the create's event arrived before the answer.
	// A safety net: the writes are forgotten as their watch events
	// arrive, which a loaded API server may delay.
	assert.Eventually(t, func() bool { return len(reconciler.RememberedWrites(r)) == 0 }, time.Minute, 20*time.Millisecond)
	assert.Empty(t, reconciler.RememberedWrites(r), "writes still remembered after every event arrived")
}
