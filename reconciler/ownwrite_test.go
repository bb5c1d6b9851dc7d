package reconciler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/finalizer"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// A step that writes its own object through the API (here another
// finalizer, with finalizer.Ensure on s.Object) gets the server's answer in
// s.Object, status included. The pass must keep what it computed before the
// step (the first step's condition, the removal of Paused) and what the
// step set after its write. Before the fix the answer's status replaced
// both: the pass wrote Ready=Unknown ("has not been reported yet") and
// Paused=True back, with an event, and the next pass flipped Ready back
// with another.
func TestStepWritingItsOwnObjectKeepsThePassStatus(t *testing.T) {
	const extra = "test.reconcilekit.io/extra"
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "config", Condition: "Configured", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.ContinueWith("Applied", "config applied")
		}},
		{Name: "own-finalizer", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			if _, err := finalizer.Ensure(ctx, s.Client, s.Object, extra, finalizer.WithAPIReader(env.Client)); err != nil {
				return reconciler.Retry(err)
			}
			s.Object.Status.Note = "extra finalizer ensured"
			return reconciler.Continue()
		}},
	}}, func(w *testv1.Widget) { w.Annotations = map[string]string{reconciler.PausedAnnotation: "true"} })

	// Paused first, so the pass that resumes it has a condition to remove.
	_, err := f.reconcile()
	require.NoError(t, err)
	require.True(t, conditions.IsTrue(f.get(), reconciler.Paused))
	f.drainEvents()
	w := f.get()
	delete(w.Annotations, reconciler.PausedAnnotation)
	require.NoError(t, env.Client.Update(f.ctx, w))

	_, err = f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, []string{"patch Widget", "patch Widget/status"}, f.c.MutatingRequests(),
		"the step's finalizer, then one status write")
	assert.Equal(t, []string{"Normal Applied Ready=True: config applied"}, trimEvents(f.drainEvents()))
	w = f.get()
	assert.Contains(t, w.Finalizers, extra)
	assertReady(t, w, metav1.ConditionTrue, "Applied", "config applied")
	assert.True(t, conditions.IsTrue(w, "Configured"), "the first step's condition survives the second step's write")
	assert.Nil(t, conditions.Get(w, reconciler.Paused), "the pass removed Paused")
	assert.Equal(t, "extra finalizer ensured", w.Status.Note, "what the step set after its write is kept")
	ready := conditions.Get(w, conditions.Ready)

	// The next pass has nothing to do: no flip back, no event.
	f.assertIdempotent()
	assert.Empty(t, f.drainEvents())
	w = f.get()
	assertReady(t, w, metav1.ConditionTrue, "Applied", "config applied")
	assert.Equal(t, ready.LastTransitionTime, conditions.Get(w, conditions.Ready).LastTransitionTime)
}
