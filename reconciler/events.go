package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/text"
)

// finish writes the labels and annotations the steps changed, then status
// if it changed, and emits transition events.
//
// Events are decided against the status the write replaced, not the pass's
// starting copy: a pass that started from a stale cached copy (right after
// our own status write) has its optimistic lock refused, re-reads, and then
// sees that Ready already says what it computed, so it repeats no event.
func (r *Reconciler[T]) finish(ctx context.Context, c client.Client, p *pass[T], passErr error) error {
	if err := p.writeOwnMetadata(ctx, c, r.opts.APIReader); err != nil {
		return err
	}
	replaced, err := p.writeStatus(ctx, c, r.opts.APIReader, statusWrites.WithLabelValues(r.opts.Name))
	if err != nil {
		return err
	}
	r.emitTransitions(replaced, p.obj, passErr)
	r.emitDeletionPaused(replaced, p.obj)
	return nil
}

// eventNoteLimit is the longest note events.k8s.io/v1 accepts.
const eventNoteLimit = 1024

// emitTransitions emits at most one event per pass, about Ready: when Ready
// appears or its status flips (Normal, or Warning when the pass failed or
// the object is Stalled), and when it stays not-True for a new reason
// because the pass failed or the object stalled (Warning). Why only Ready:
// docs/reconciler.md, "Metrics and events".
func (r *Reconciler[T]) emitTransitions(orig, obj T, passErr error) {
	if r.opts.Recorder == nil {
		return
	}
	ready := conditions.Get(obj, conditions.Ready)
	if ready == nil {
		return
	}
	warning := ready.Status != metav1.ConditionTrue && (passErr != nil || conditions.IsTrue(obj, conditions.Stalled))
	before := conditions.Get(orig, conditions.Ready)
	switch {
	case before == nil || before.Status != ready.Status:
	case warning && before.Reason != ready.Reason:
	default:
		return
	}
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	note := fmt.Sprintf("%s=%s", ready.Type, ready.Status)
	if ready.Message != "" {
		note += ": " + ready.Message
	}
	r.opts.Recorder.Eventf(obj, nil, eventType, ready.Reason, "Reconcile", "%s", text.Truncate(note, eventNoteLimit, "…"))
}
