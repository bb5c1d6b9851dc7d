package reconciler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// The API server deletes an object whose last finalizer a write removes
// without storing that write, so the deletion event shows the object as it
// was before it: our finalizer still listed. Taken for a deletion that
// bypassed the finalizer, it ran the cleanup a second time on that state
// (the bench: 945 of 1,000 deleted WebApps deregistered twice). Each
// Widget's cleanup runs once, whether the removal of our finalizer deletes
// it or another finalizer keeps it.
func TestCleanupRunsOnceWhenRemovingTheFinalizerDeletes(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	var mu sync.Mutex
	runs := map[string]int{}
	startWidgetController(t, ns, reconciler.Options[*testv1.Widget]{
		Steps:     []widgetStep{{Name: "a", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }}},
		Finalizer: cleanupFinalizer,
		Cleanup: []widgetStep{{Name: "release", Run: func(_ context.Context, s *scope) reconciler.Outcome {
			mu.Lock()
			defer mu.Unlock()
			runs[s.Object.Name]++
			return reconciler.Continue()
		}}},
	})
	create := func(name string, finalizers ...string) {
		t.Helper()
		require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: finalizers}}))
		require.Eventually(t, func() bool {
			w := &testv1.Widget{}
			return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, w) == nil &&
				controllerutil.ContainsFinalizer(w, cleanupFinalizer)
		}, 30*time.Second, 10*time.Millisecond, "%s: the finalizer ensured", name)
	}
	create("deleted")
	create("held", holdFinalizer)
	for _, name := range []string{"deleted", "held"} {
		require.NoError(t, env.Client.Delete(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
	}
	require.Eventually(t, func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "deleted"}, &testv1.Widget{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 10*time.Millisecond, "deleted once its cleanup ran")
	held := &testv1.Widget{}
	require.Eventually(t, func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "held"}, held) == nil &&
			!controllerutil.ContainsFinalizer(held, cleanupFinalizer)
	}, 30*time.Second, 10*time.Millisecond, "held: our finalizer removed")
	// The other controller lets it go: its deletion event lists no
	// finalizer of ours.
	held.Finalizers = nil
	require.NoError(t, env.Client.Update(ctx, held))

	// The controller has one worker and its queue is first in, first
	// out: once a Widget created after both deletions has had its pass,
	// the passes their deletion events started have ended.
	create("sentinel")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"deleted": 1, "held": 1}, runs)
}

// A deletion event for an object that was not deleted (a sharded cache
// passes one on when the object leaves this replica's ranges, and before
// the fix for every update of another replica's objects) held its last
// state under its name; the pass that then found the object live left it
// there, and once the object was really deleted and cleaned up, the next
// pass on the name ran the cleanup again on that stale state. The live
// object's pass drops a last state with its own UID.
func TestDeletionEventOfALiveObjectRunsNoSecondCleanup(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	runs := 0
	var r *reconciler.Reconciler[*testv1.Widget]
	mgr := env.StartManager(t, func(mgr manager.Manager) error {
		var err error
		r, err = reconciler.New(mgr, reconciler.Options[*testv1.Widget]{
			Name:      "live-deletion-event",
			Steps:     []widgetStep{{Name: "a", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }}},
			Finalizer: cleanupFinalizer,
			Cleanup: []widgetStep{{Name: "release", Run: func(context.Context, *scope) reconciler.Outcome {
				runs++
				return reconciler.Continue()
			}}},
		})
		return err
	})
	key := client.ObjectKey{Namespace: ns, Name: "w"}
	req := reconcile.Request{NamespacedName: key}
	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}))
	// pass runs Reconcile until the cached Widget satisfies cond.
	pass := func(what string, cond func(w *testv1.Widget, err error) bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			_, err := r.Reconcile(ctx, req)
			require.NoError(t, err)
			w := &testv1.Widget{}
			return cond(w, mgr.Client.Get(ctx, key, w))
		}, 30*time.Second, 10*time.Millisecond, what)
	}
	pass("the finalizer ensured", func(w *testv1.Widget, err error) bool {
		return err == nil && controllerutil.ContainsFinalizer(w, cleanupFinalizer)
	})
	live := &testv1.Widget{}
	require.NoError(t, mgr.Client.Get(ctx, key, live))

	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.DeletedWithFinalizer().Delete(ctx, event.DeleteEvent{Object: live}, q)
	require.Equal(t, 1, q.Len(), "a deletion event listing the finalizer queues the object")
	_, err := r.Reconcile(ctx, req) // finds it live
	require.NoError(t, err)

	require.NoError(t, env.Client.Delete(ctx, live))
	pass("deleted once its cleanup ran", func(_ *testv1.Widget, err error) bool { return apierrors.IsNotFound(err) })
	_, err = r.Reconcile(ctx, req) // the pass its real deletion event starts
	require.NoError(t, err)
	assert.Equal(t, 1, runs, "cleanup runs")
}

// An object deleted while it still listed the finalizer (its cleanup
// bypassed: docs/finalizer.md, "A deletion that races the finalizer") and
// created again under its name before the pass that cleans up after it:
// the first pass on the name finds the new object. The deleted one's
// cleanup ran only once the new one was gone too, if ever; now it runs in
// that first pass, before the new object's steps (a cleanup keyed by the
// name, run after them, would undo their work).
func TestRecreatedObjectWaitsForItsPredecessorsCleanup(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	var log []string
	var r *reconciler.Reconciler[*testv1.Widget]
	mgr := env.StartManager(t, func(mgr manager.Manager) error {
		var err error
		r, err = reconciler.New(mgr, reconciler.Options[*testv1.Widget]{
			Name: "recreated-cleanup",
			Steps: []widgetStep{{Name: "a", Run: func(_ context.Context, s *scope) reconciler.Outcome {
				log = append(log, "step "+string(s.Object.UID))
				return reconciler.Continue()
			}}},
			Finalizer: cleanupFinalizer,
			Cleanup: []widgetStep{{Name: "release", Run: func(_ context.Context, s *scope) reconciler.Outcome {
				log = append(log, "cleanup "+string(s.Object.UID))
				return reconciler.Continue()
			}}},
		})
		return err
	})
	key := client.ObjectKey{Namespace: ns, Name: "w"}
	req := reconcile.Request{NamespacedName: key}
	cachedUID := func() types.UID {
		w := &testv1.Widget{}
		if mgr.Client.Get(ctx, key, w) != nil {
			return ""
		}
		return w.UID
	}
	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}))
	first := &testv1.Widget{}
	require.Eventually(t, func() bool {
		_, err := r.Reconcile(ctx, req)
		require.NoError(t, err)
		return mgr.Client.Get(ctx, key, first) == nil && controllerutil.ContainsFinalizer(first, cleanupFinalizer)
	}, 30*time.Second, 10*time.Millisecond, "the finalizer ensured")

	// Deleted with the finalizer bypassed: gone, and its deletion event
	// lists the finalizer. Read from the API server, not the cache: the
	// pass that ensured the finalizer wrote the status after it, and the
	// cache may not hold that write yet (the Update then conflicted in 3
	// or more runs of a -count=15 here; 30 of 30 pass reading the server).
	require.NoError(t, env.Client.Get(ctx, key, first))
	bypassed := first.DeepCopy()
	controllerutil.RemoveFinalizer(first, cleanupFinalizer)
	require.NoError(t, env.Client.Update(ctx, first))
	require.NoError(t, env.Client.Delete(ctx, first))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.DeletedWithFinalizer().Delete(ctx, event.DeleteEvent{Object: bypassed}, q)
	require.Equal(t, 1, q.Len())

	// Created again before the pass runs.
	second := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}
	require.NoError(t, env.Client.Create(ctx, second))
	require.Eventually(t, func() bool { return cachedUID() == second.UID }, 30*time.Second, 10*time.Millisecond, "the cache holds the new Widget")
	log = nil
	_, err := r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, []string{"cleanup " + string(first.UID), "step " + string(second.UID)}, log,
		"the deleted Widget's cleanup, then the new one's steps")
}
