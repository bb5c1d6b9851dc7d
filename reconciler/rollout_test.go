package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// A rollout kstatus judges Failed (a Deployment's ProgressDeadlineExceeded)
// stalls the object, and the pass asks to be run again after
// StalledRecheck rather than returning a terminal error, which
// controller-runtime never retries: the Deployment can recover by itself
// (an image that becomes pullable), and the event that says so may never
// reach the controller (a predicate dropping status updates). The pass the
// requeue brings finds the recovery. RequeueAfter(0) on the outcome takes the
// re-check back.
func TestFailedRolloutIsRechecked(t *testing.T) {
	recheck := reconciler.StalledRecheck
	var override *time.Duration
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&appsv1.Deployment{}}, Steps: []widgetStep{
		{Name: "deployment", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			if _, err := s.Apply(ctx, testDeployment(s.Object, "example.com/app:v1")); err != nil {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		}},
		{Name: "rollout", Condition: "Available", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			var d appsv1.Deployment
			if err := s.Client.Get(ctx, client.ObjectKeyFromObject(s.Object), &d); err != nil {
				return reconciler.Retry(err)
			}
			if override != nil {
				return s.Rollout(&d).RequeueAfter(*override)
			}
			return s.Rollout(&d)
		}},
	}})
	_, err := f.reconcile()
	require.NoError(t, err)
	d := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(f.ctx, f.req.NamespacedName, d))
	markRolledOut(t, f.ctx, d, &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "w-1" has timed out progressing.`})
	waitForCache(t, f, d)
	f.drainEvents()

	res, err := f.reconcile()
	require.NoError(t, err, "a failed rollout is re-checked, not a terminal error")
	assert.Equal(t, recheck, res.RequeueAfter)
	w := f.get()
	stalled := conditions.Get(w, conditions.Stalled)
	require.NotNil(t, stalled)
	assert.Equal(t, "ProgressDeadlineExceeded", stalled.Reason)
	assert.True(t, conditions.IsFalse(w, conditions.Ready))
	assert.Equal(t, []string{"Warning ProgressDeadlineExceeded"}, typeAndReason(f.drainEvents()), "Stalled is a warning")

	// Re-checked while still failed: nothing is written, nothing said.
	f.sync()
	f.c.Reset()
	res, err = f.r.Reconcile(f.ctx, f.req)
	require.NoError(t, err)
	assert.Equal(t, recheck, res.RequeueAfter)
	assert.Zero(t, f.c.Mutations(), "%s", f.c)
	assert.Empty(t, f.drainEvents())

	// The Deployment recovers; the re-check finds it.
	require.NoError(t, env.Client.Get(f.ctx, f.req.NamespacedName, d))
	markRolledOut(t, f.ctx, d, nil)
	waitForCache(t, f, d)
	res, err = f.reconcile()
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter, "recovered: no more re-checks")
	w = f.get()
	assert.True(t, conditions.IsTrue(w, conditions.Ready))
	assert.Nil(t, conditions.Get(w, conditions.Stalled))

	// The opt-out: a purely terminal failure.
	require.NoError(t, env.Client.Get(f.ctx, f.req.NamespacedName, d))
	markRolledOut(t, f.ctx, d, &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "w-1" has timed out progressing.`})
	waitForCache(t, f, d)
	override = new(time.Duration)
	res, err = f.reconcile()
	assert.True(t, errors.Is(err, reconcile.TerminalError(nil)), "RequeueAfter(0): terminal, %v", err)
	assert.Zero(t, res.RequeueAfter)
	assert.True(t, conditions.IsTrue(f.get(), conditions.Stalled))
}
