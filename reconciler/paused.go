package reconciler

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconcilekit/reconcilekit/conditions"
)

// PausedAnnotation on an object stops the reconciler from touching it: no
// steps, no finalizer changes, no cleanup, only the Paused condition (written
// once). Remove the annotation to resume. Use it to take an object out of an
// operator's hands during an incident or a manual migration. That holds for
// its deletion too: a paused object that is being deleted keeps the
// finalizers this reconciler would remove, and Paused says so (reason
// [ReasonDeletionPaused], with one Warning event).
const PausedAnnotation = "reconcilekit.io/paused"

// Paused is the condition type that says an object is paused.
const Paused = "Paused"

// ReasonDeletionPaused is the reason of the Paused condition, and of a
// Warning event, when a paused object is being deleted and a finalizer this
// reconciler removes still holds it: cleanup does not run while the object
// is paused, so the deletion waits for the annotation to go.
const ReasonDeletionPaused = "DeletionPaused"

// markPaused sets Paused=True on a paused object: reason PausedByAnnotation,
// or DeletionPaused when the object is being deleted and one of the
// finalizers this reconciler removes holds it. Marked once per reason:
// re-stamping it on every generation would be a write.
func (r *Reconciler[T]) markPaused(obj T) error {
	reason := ReasonPaused
	msg := fmt.Sprintf("the %s annotation is set; remove it to resume", PausedAnnotation)
	if held := r.holding(obj); len(held) > 0 {
		reason = ReasonDeletionPaused
		msg = fmt.Sprintf("the object is being deleted, but the %s annotation is set: cleanup does not run and finalizer %s stays "+
			"until it is removed", PausedAnnotation, strings.Join(held, ", "))
	}
	if c := conditions.Get(obj, Paused); c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason && c.Message == msg {
		return nil
	}
	return conditions.MarkTrue(obj, Paused, reason, "%s", msg)
}

// holding returns the finalizers this reconciler removes that hold obj's
// deletion, none when obj is not being deleted.
func (r *Reconciler[T]) holding(obj T) []string {
	if obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	return r.heldFinalizers(obj)
}

// emitDeletionPaused emits one Warning when this pass's status says, and
// the status it replaced did not, that a paused object's deletion waits:
// the condition alone is easy to miss on an object that is going away.
func (r *Reconciler[T]) emitDeletionPaused(replaced, obj T) {
	now := conditions.Get(obj, Paused)
	if now == nil || now.Reason != ReasonDeletionPaused {
		return
	}
	if before := conditions.Get(replaced, Paused); before != nil && before.Reason == ReasonDeletionPaused {
		return
	}
	r.event(obj, corev1.EventTypeWarning, ReasonDeletionPaused, actionCleanup, now.Message)
}
