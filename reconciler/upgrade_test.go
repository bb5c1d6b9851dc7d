package reconciler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

// An operator release that drops Cleanup must not strand the objects an
// earlier release gave its finalizer. Version 1 (a cleanup step guarded by
// a finalizer) runs under a manager and reconciles three Widgets, then
// stops; one Widget is deleted while no operator runs, so it is
// Terminating when version 2 (no Cleanup) starts. With the finalizer in
// RetiredFinalizers, version 2 lets the deleting Widget go, removes the
// finalizer from the live ones (one write each, once), and deleting those
// completes too. A version 2 that just dropped Cleanup leaves every one of
// them Terminating.
func TestUpgradeThatDropsCleanup(t *testing.T) {
	testenv.Require(t)
	step := widgetStep{Name: "a", Condition: "AReady", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }}
	v1 := reconciler.Options[*testv1.Widget]{Name: "widget-v1", Steps: []widgetStep{step}, Finalizer: cleanupFinalizer,
		Cleanup: []widgetStep{{Name: "release", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }}}}
	for _, tt := range []struct {
		name    string
		retired []string
	}{
		{"without RetiredFinalizers", nil},
		{"with RetiredFinalizers", []string{cleanupFinalizer}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ns := env.Namespace(t)
			keys := make([]types.NamespacedName, 3)
			for i := range keys {
				keys[i] = types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("w%d", i)}
			}

			op1 := runOperator(t, ns, v1)
			for _, k := range keys {
				require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}))
			}
			for _, k := range keys {
				require.Eventually(t, func() bool {
					w := &testv1.Widget{}
					return env.Client.Get(ctx, k, w) == nil && controllerutil.ContainsFinalizer(w, cleanupFinalizer) &&
						conditions.IsTrue(w, conditions.Ready)
				}, 30*time.Second, 10*time.Millisecond, "version 1 reconciles %s", k)
			}
			op1.stop(t)

			// Deleted between the two versions: Terminating, held by the
			// finalizer version 1 added.
			deleting := keys[0]
			require.NoError(t, env.Client.Delete(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: deleting.Namespace, Name: deleting.Name}}))

			op2 := runOperator(t, ns, reconciler.Options[*testv1.Widget]{Name: "widget-v2", Steps: []widgetStep{step},
				RetiredFinalizers: tt.retired})
			if tt.retired == nil {
				// Version 2 runs a pass over every Widget, and nothing lets
				// them go.
				op2.waitForPass(t, deleting, true)
				for _, k := range keys[1:] {
					op2.waitForPass(t, k, false)
					require.NoError(t, env.Client.Delete(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}))
				}
				for _, k := range keys {
					op2.waitForPass(t, k, true)
					w := &testv1.Widget{}
					require.NoError(t, env.Client.Get(ctx, k, w), "%s is gone", k)
					assert.NotNil(t, w.DeletionTimestamp)
					assert.Contains(t, w.Finalizers, cleanupFinalizer, "%s is stranded in Terminating", k)
				}
				// Let the namespace go.
				for _, k := range keys {
					w := &testv1.Widget{}
					require.NoError(t, env.Client.Get(ctx, k, w))
					controllerutil.RemoveFinalizer(w, cleanupFinalizer)
					require.NoError(t, env.Client.Update(ctx, w))
				}
				return
			}

			require.Eventually(t, func() bool { return gone(t, deleting) }, 30*time.Second, 10*time.Millisecond,
				"version 2 lets the Widget deleted before it started go")
			for _, k := range keys[1:] {
				require.Eventually(t, func() bool {
					w := &testv1.Widget{}
					require.NoError(t, env.Client.Get(ctx, k, w))
					return !controllerutil.ContainsFinalizer(w, cleanupFinalizer)
				}, 30*time.Second, 10*time.Millisecond, "version 2 removes the retired finalizer from live %s", k)
			}
			// Each Widget cost one finalizer write, and the pass that its
			// watch event brings writes nothing more.
			for _, k := range keys[1:] {
				w := &testv1.Widget{}
				require.NoError(t, env.Client.Get(ctx, k, w))
				op2.waitForPassAt(t, k, w.ResourceVersion)
			}
			assert.Equal(t, []string{"patch Widget", "patch Widget", "patch Widget"}, op2.c.MutatingRequests(),
				"one finalizer patch per Widget, nothing else")
			for _, k := range keys[1:] {
				require.NoError(t, env.Client.Delete(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}))
				require.Eventually(t, func() bool { return gone(t, k) }, 30*time.Second, 10*time.Millisecond, "deleting %s completes", k)
			}
		})
	}
}

func gone(t *testing.T, k types.NamespacedName) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), k, &testv1.Widget{})
	if apierrors.IsNotFound(err) {
		return true
	}
	require.NoError(t, err)
	return false
}

// operator is one version of a Widget operator running under its own
// manager, watching one namespace, until stop.
type operator struct {
	c      *reconcilertest.Client
	cache  client.Reader
	cancel context.CancelFunc
	done   chan error
	once   sync.Once

	mu sync.Mutex
	// passed: a pass over the key ended that had read it deleting (true)
	// or live (false) from the cache before it started; passedAt: at
	// these resourceVersions.
	passed   map[types.NamespacedName]map[bool]bool
	passedAt map[types.NamespacedName]map[string]bool
}

func runOperator(t *testing.T, ns string, opts reconciler.Options[*testv1.Widget]) *operator {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	op := &operator{c: reconcilertest.NewClient(mgr.GetClient()), cache: mgr.GetClient(), done: make(chan error, 1),
		passed: map[types.NamespacedName]map[bool]bool{}, passedAt: map[types.NamespacedName]map[string]bool{}}
	opts.Client = op.c
	r, err := reconciler.New(mgr, opts)
	require.NoError(t, err)
	require.NoError(t, ctrl.NewControllerManagedBy(mgr).Named(opts.Name).For(&testv1.Widget{}).
		WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })).
		WithOptions(controller.Options{SkipNameValidation: new(true)}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
			w := &testv1.Widget{}
			readErr := op.cache.Get(ctx, req.NamespacedName, w)
			res, err := r.Reconcile(ctx, req)
			if readErr == nil {
				k := req.NamespacedName
				op.mu.Lock()
				if op.passed[k] == nil {
					op.passed[k], op.passedAt[k] = map[bool]bool{}, map[string]bool{}
				}
				op.passed[k][w.DeletionTimestamp != nil] = true
				op.passedAt[k][w.ResourceVersion] = true
				op.mu.Unlock()
			}
			return res, err
		})))
	ctx, cancel := context.WithCancel(context.Background())
	op.cancel = cancel
	go func() { op.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { op.stop(t) })
	return op
}

// stop stops the manager and waits until it has.
func (op *operator) stop(t *testing.T) {
	op.once.Do(func() {
		op.cancel()
		select {
		case err := <-op.done:
			assert.NoError(t, err, "manager stopped with an error")
		case <-time.After(time.Minute):
			t.Errorf("manager did not stop within a minute")
		}
	})
}

// waitForPass waits until a pass over k has ended that read it deleting, or
// live.
func (op *operator) waitForPass(t *testing.T, k types.NamespacedName, deleting bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		op.mu.Lock()
		defer op.mu.Unlock()
		return op.passed[k][deleting]
	}, 30*time.Second, 10*time.Millisecond, "a pass over %s (deleting: %v)", k, deleting)
}

// waitForPassAt waits until a pass over k has ended that read it at
// resourceVersion rv.
func (op *operator) waitForPassAt(t *testing.T, k types.NamespacedName, rv string) {
	t.Helper()
	require.Eventually(t, func() bool {
		op.mu.Lock()
		defer op.mu.Unlock()
		return op.passedAt[k][rv]
	}, 30*time.Second, 10*time.Millisecond, "a pass over %s at resourceVersion %s", k, rv)
}

// An operator release that renames its finalizer must not lose the cleanup
// of objects deleted during the upgrade. Version 1 (Finalizer old, a
// cleanup step) reconciles two Widgets and stops; one is deleted while no
// operator runs, so it is Terminating, held by old alone (or by old and
// new: a version 2 pass added new and stopped before it removed old).
// Version 2 (Finalizer new, RetiredFinalizers old, a cleanup step that
// counts its calls) must run the cleanup of the deleting Widget exactly
// once and then let it go; the live Widget gets new in place of old, and
// its later deletion runs the cleanup once too.
func TestUpgradeThatRenamesTheFinalizer(t *testing.T) {
	testenv.Require(t)
	const (
		oldFinalizer = "test.reconcilekit.io/cleanup-v1"
		newFinalizer = "test.reconcilekit.io/cleanup-v2"
	)
	step := widgetStep{Name: "a", Condition: "AReady", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }}
	v1 := reconciler.Options[*testv1.Widget]{Name: "widget-v1", Steps: []widgetStep{step}, Finalizer: oldFinalizer,
		Cleanup: []widgetStep{{Name: "release", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }}}}
	for _, tt := range []struct {
		name       string
		finalizers []string // what the deleted Widget carries when version 2 starts
	}{
		{"deleted with the old finalizer only", []string{oldFinalizer}},
		{"deleted with the old and the new finalizer", []string{oldFinalizer, newFinalizer}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ns := env.Namespace(t)
			deleting := types.NamespacedName{Namespace: ns, Name: "deleting"}
			live := types.NamespacedName{Namespace: ns, Name: "live"}

			op1 := runOperator(t, ns, v1)
			for _, k := range []types.NamespacedName{deleting, live} {
				require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}))
				require.Eventually(t, func() bool {
					w := &testv1.Widget{}
					return env.Client.Get(ctx, k, w) == nil && controllerutil.ContainsFinalizer(w, oldFinalizer) &&
						conditions.IsTrue(w, conditions.Ready)
				}, 30*time.Second, 10*time.Millisecond, "version 1 reconciles %s", k)
			}
			op1.stop(t)

			w := &testv1.Widget{}
			require.NoError(t, env.Client.Get(ctx, deleting, w))
			if len(tt.finalizers) == 2 {
				controllerutil.AddFinalizer(w, newFinalizer)
				require.NoError(t, env.Client.Update(ctx, w))
			}
			// Deleted between the two versions: Terminating, held by what
			// the earlier releases added.
			require.NoError(t, env.Client.Delete(ctx, w))
			require.NoError(t, env.Client.Get(ctx, deleting, w))
			require.NotNil(t, w.DeletionTimestamp)
			require.ElementsMatch(t, tt.finalizers, w.Finalizers)

			var mu sync.Mutex
			calls := map[types.NamespacedName]int{}
			count := func(k types.NamespacedName) int {
				mu.Lock()
				defer mu.Unlock()
				return calls[k]
			}
			op2 := runOperator(t, ns, reconciler.Options[*testv1.Widget]{Name: "widget-v2", Steps: []widgetStep{step},
				Finalizer: newFinalizer, RetiredFinalizers: []string{oldFinalizer},
				Cleanup: []widgetStep{{Name: "release", Run: func(_ context.Context, s *scope) reconciler.Outcome {
					mu.Lock()
					defer mu.Unlock()
					calls[client.ObjectKeyFromObject(s.Object)]++
					return reconciler.Continue()
				}}}})

			require.Eventually(t, func() bool { return gone(t, deleting) }, 30*time.Second, 10*time.Millisecond,
				"version 2 lets the Widget deleted before it started go")
			assert.Equal(t, 1, count(deleting), "version 2 ran the cleanup of the Widget deleted before it started, once")

			require.Eventually(t, func() bool {
				w := &testv1.Widget{}
				require.NoError(t, env.Client.Get(ctx, live, w))
				return controllerutil.ContainsFinalizer(w, newFinalizer) && !controllerutil.ContainsFinalizer(w, oldFinalizer)
			}, 30*time.Second, 10*time.Millisecond, "version 2 swaps the retired finalizer for the new one on live %s", live)
			assert.Zero(t, count(live), "no cleanup for a live Widget")
			require.NoError(t, env.Client.Delete(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: live.Namespace, Name: live.Name}}))
			require.Eventually(t, func() bool { return gone(t, live) }, 30*time.Second, 10*time.Millisecond, "deleting %s completes", live)
			assert.Equal(t, 1, count(live), "the cleanup of %s ran once", live)

			// Nothing runs a cleanup again once the Widgets are gone.
			op2.stop(t)
			assert.Equal(t, 1, count(deleting))
			assert.Equal(t, 1, count(live))
		})
	}
}

// DeletedWithFinalizer queues a Widget deleted while it lists a retired
// finalizer, as one listing Options.Finalizer, when the reconciler has
// Cleanup: after a rename the retired finalizer still guards the cleanup.
// Without Cleanup a retired finalizer guards nothing, and a Widget listing
// no finalizer of ours is never queued.
func TestDeletedWithFinalizerQueuesRetiredFinalizers(t *testing.T) {
	testenv.Require(t)
	const (
		oldFinalizer = "test.reconcilekit.io/cleanup-v1"
		newFinalizer = "test.reconcilekit.io/cleanup-v2"
	)
	cleanup := []widgetStep{{Name: "release", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }}}
	for _, tt := range []struct {
		name       string
		opts       reconciler.Options[*testv1.Widget]
		finalizers []string
		queued     bool
	}{
		{"renamed, retired listed", reconciler.Options[*testv1.Widget]{Finalizer: newFinalizer, RetiredFinalizers: []string{oldFinalizer}, Cleanup: cleanup},
			[]string{oldFinalizer}, true},
		{"renamed, both listed", reconciler.Options[*testv1.Widget]{Finalizer: newFinalizer, RetiredFinalizers: []string{oldFinalizer}, Cleanup: cleanup},
			[]string{oldFinalizer, newFinalizer}, true},
		{"renamed, none of ours listed", reconciler.Options[*testv1.Widget]{Finalizer: newFinalizer, RetiredFinalizers: []string{oldFinalizer}, Cleanup: cleanup},
			[]string{holdFinalizer}, false},
		{"cleanup dropped, retired listed", reconciler.Options[*testv1.Widget]{RetiredFinalizers: []string{oldFinalizer}},
			[]string{oldFinalizer}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
			require.NoError(t, err)
			opts := tt.opts
			opts.Name = "widget-deleted"
			opts.Steps = []widgetStep{{Name: "a", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }}}
			r, err := reconciler.New(mgr, opts)
			require.NoError(t, err)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "u", Finalizers: tt.finalizers}}
			r.DeletedWithFinalizer().Delete(context.Background(), event.DeleteEvent{Object: w}, q)
			want := 0
			if tt.queued {
				want = 1
			}
			assert.Equal(t, want, q.Len())
		})
	}
}
