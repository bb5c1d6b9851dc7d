package reconciler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// A paused object that is being deleted: paused means hands off, so
// cleanup does not run and the finalizer stays, but the wait is not
// silent. Paused says why (reason DeletionPaused, naming the finalizer),
// one Warning event says so, and reconcilekit_cleanup_overdue_objects
// counts the object past CleanupDeadline. Removing the annotation lets
// cleanup run and the deletion complete. Before, the pass only kept
// Paused=True as it was: the object hung in Terminating with nothing
// pointing at the annotation.
func TestPausedDeletionWaitsVisibly(t *testing.T) {
	var cleaned atomic.Int32
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps:           []widgetStep{continueStep("a", "AReady", new([]string))},
		Finalizer:       cleanupFinalizer,
		CleanupDeadline: time.Nanosecond,
		Cleanup: []widgetStep{{Name: "release", Run: func(context.Context, *scope) reconciler.Outcome {
			cleaned.Add(1)
			return reconciler.Continue()
		}}},
	})
	_, err := f.reconcile()
	require.NoError(t, err)
	w := f.get()
	require.Contains(t, w.Finalizers, cleanupFinalizer)
	w.Annotations = map[string]string{reconciler.PausedAnnotation: "true"}
	require.NoError(t, env.Client.Update(f.ctx, w))
	_, err = f.reconcile()
	require.NoError(t, err)
	paused := conditions.Get(f.get(), reconciler.Paused)
	require.NotNil(t, paused)
	require.Equal(t, reconciler.ReasonPaused, paused.Reason)
	f.drainEvents()

	require.NoError(t, env.Client.Delete(f.ctx, f.get()))
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.Zero(t, cleaned.Load(), "no cleanup while paused")
	w = f.get()
	assert.Contains(t, w.Finalizers, cleanupFinalizer, "the deletion waits")
	paused = conditions.Get(w, reconciler.Paused)
	require.NotNil(t, paused)
	assert.Equal(t, metav1.ConditionTrue, paused.Status)
	assert.Equal(t, reconciler.ReasonDeletionPaused, paused.Reason)
	assert.Contains(t, paused.Message, cleanupFinalizer)
	assert.Contains(t, paused.Message, reconciler.PausedAnnotation)
	evs := f.drainEvents()
	assert.Equal(t, []string{"Warning DeletionPaused"}, typeAndReason(evs))
	v, _ := gauge(t, "reconcilekit_cleanup_overdue_objects", f.opts.Name)
	assert.Equal(t, 1.0, v, "past CleanupDeadline, the paused deletion is overdue")

	// Said once: the next pass writes nothing and emits nothing.
	f.assertIdempotent()
	assert.Empty(t, f.drainEvents())
	assert.Zero(t, cleaned.Load())

	w = f.get()
	delete(w.Annotations, reconciler.PausedAnnotation)
	require.NoError(t, env.Client.Update(f.ctx, w))
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.EqualValues(t, 1, cleaned.Load(), "resumed: cleanup runs")
	assert.True(t, widgetGone(t, f), "and the deletion completes")
	v, _ = gauge(t, "reconcilekit_cleanup_overdue_objects", f.opts.Name)
	assert.Zero(t, v)
}
