package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/finalizer"
	"github.com/reconcilekit/reconcilekit/internal/text"
)

// Reasons of the deletion path's events (and of Ready while cleanup fails).
// They are stable so that alerts and tests can match on them.
const (
	// ReasonCleanupFailed (Warning event; Ready=False): a cleanup step
	// returned Retry or Terminal, or panicked.
	ReasonCleanupFailed = "CleanupFailed"
	// ReasonCleanupOverdue (Warning): the object has been terminating for
	// longer than Options.CleanupDeadline; emitted on every pass until it is
	// gone, naming the step that holds it.
	ReasonCleanupOverdue = "CleanupOverdue"
	// ReasonFinalizerForceRemoved (Warning): cleanup did not finish by the
	// deadline and Options.RemoveFinalizerAfterDeadline removed the finalizer
	// anyway; what the failing step should have cleaned up may be left
	// behind.
	ReasonFinalizerForceRemoved = "FinalizerForceRemoved"
	// ReasonCleanupSucceeded (Normal): every cleanup step succeeded and the
	// finalizer was removed.
	ReasonCleanupSucceeded = "CleanupSucceeded"
)

// Event actions of the deletion path, the events.k8s.io/v1 "action" field.
const (
	actionCleanup         = "Cleanup"
	actionRemoveFinalizer = "RemoveFinalizer"
)

// delete runs the deletion path: the Cleanup steps, in order, with the same
// Scope, counted client, logging, metrics and panic handling as the live
// steps, then the finalizers' removal (a CleanupSucceeded event). A step
// that stops the pass leaves the finalizers and sets Ready=False saying
// why; what each outcome emits and the deadline policy are in
// cleanupStopped and in docs/finalizer.md ("API"). A live object's Ready
// events are not emitted here: the cleanup events tell the deletion's
// story once.
//
// With Cleanup, a retired finalizer guards the cleanup as Options.Finalizer
// does (a renamed finalizer: the object may have been deleted before any
// pass of this release gave it the new name): an object that lists either
// has its cleanup run, and all of them are removed together, in one patch,
// once every step continued. Without Cleanup the retired finalizers guard
// nothing and are removed at once.
func (r *Reconciler[T]) delete(ctx context.Context, s *Scope[T], p *pass[T]) (ctrl.Result, error) {
	obj := s.Object
	if len(r.opts.Cleanup) == 0 {
		changed, err := r.removeRetired(ctx, s.Client, obj)
		if err != nil {
			return ctrl.Result{}, err
		}
		p.adopt(changed)
		conditions.Delete(obj, Paused)
		return ctrl.Result{}, nil
	}
	conditions.Delete(obj, Paused)
	held := r.heldFinalizers(obj)
	if len(held) == 0 {
		return ctrl.Result{}, nil
	}
	for _, step := range r.opts.Cleanup {
		out := r.runStep(ctx, step, s)
		if out.kind == kindContinue {
			continue
		}
		res, err := r.cleanupStopped(ctx, s, step.Name, out)
		// Also after a forced removal: another finalizer may keep the
		// object, and Ready must say its cleanup failed (a gone object
		// is not an error).
		if _, werr := p.writeStatus(ctx, s.Client, r.opts.APIReader, statusWrites.WithLabelValues(r.opts.Name)); werr != nil {
			return ctrl.Result{}, errors.Join(retryable(err), werr)
		}
		return res, err
	}
	changed, err := r.removeFinalizer(ctx, s.Client, obj)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("all cleanup steps succeeded: %w", err)
	}
	if changed {
		r.event(obj, corev1.EventTypeNormal, ReasonCleanupSucceeded, actionRemoveFinalizer,
			fmt.Sprintf("all %d cleanup steps succeeded; removed %s", len(r.opts.Cleanup), describeFinalizers(held)))
	}
	return ctrl.Result{}, nil
}

// cleanupStopped reports a cleanup step that did not continue and applies
// the deadline policy.
func (r *Reconciler[T]) cleanupStopped(ctx context.Context, s *Scope[T], step string, out Outcome) (res ctrl.Result, err error) {
	obj := s.Object
	msg := fmt.Sprintf("cleanup step %s: %s", step, out.conditionMessage())
	reason := out.reason
	switch out.kind {
	case kindWait:
		res.RequeueAfter = out.after
	case kindError:
		err = fmt.Errorf("cleanup step %s: %w", step, out.err)
	case kindTerminal:
		err = reconcile.TerminalError(fmt.Errorf("cleanup step %s: %w", step, out.err))
	}
	if err != nil {
		reason = ReasonCleanupFailed
		r.event(obj, corev1.EventTypeWarning, ReasonCleanupFailed, actionCleanup, msg)
	}
	// The deadline first: a forced removal replaces obj with the
	// server's copy, and the condition must be set on that.
	deadline := r.opts.CleanupDeadline
	left := time.Until(obj.GetDeletionTimestamp().Add(deadline))
	forced, ferr := false, error(nil)
	if deadline > 0 && left < 0 {
		forced, ferr = r.overdue(ctx, s, -left+deadline, msg)
	}
	if cerr := conditions.MarkFalse(obj, conditions.Ready, reason, "%s", msg); cerr != nil {
		err = errors.Join(err, cerr)
	}
	switch {
	case ferr != nil:
		return res, errors.Join(err, ferr)
	case forced:
		// The policy chose deletion over cleanup; the events said why.
		return ctrl.Result{}, nil
	case deadline > 0 && left > 0 && err == nil && (res.RequeueAfter == 0 || res.RequeueAfter > left):
		// A waiting step must still be looked at when the deadline
		// passes, even with no watch to wake it; once it has passed, the
		// step's own After or a watch event decides.
		res.RequeueAfter = left
	}
	return res, err
}

// overdue emits CleanupOverdue for an object stuck this long (past the
// deadline) and, with RemoveFinalizerAfterDeadline, removes the finalizer.
// forced reports whether the finalizer is gone.
func (r *Reconciler[T]) overdue(ctx context.Context, s *Scope[T], stuck time.Duration, holdup string) (forced bool, err error) {
	deadline := r.opts.CleanupDeadline
	r.event(s.Object, corev1.EventTypeWarning, ReasonCleanupOverdue, actionCleanup,
		fmt.Sprintf("cleanup has been stuck for %s since deletion (deadline %s): %s", stuck.Round(time.Second), deadline, holdup))
	if !r.opts.RemoveFinalizerAfterDeadline {
		return false, nil
	}
	held := describeFinalizers(r.heldFinalizers(s.Object))
	changed, err := r.removeFinalizer(ctx, s.Client, s.Object)
	if err != nil {
		return false, fmt.Errorf("removing %s after the cleanup deadline: %w", held, err)
	}
	if changed {
		r.event(s.Object, corev1.EventTypeWarning, ReasonFinalizerForceRemoved, actionRemoveFinalizer,
			fmt.Sprintf("removed %s without completing cleanup, %s after deletion (deadline %s): %s; resources it guards may be left behind",
				held, stuck.Round(time.Second), deadline, holdup))
	}
	return true, nil
}

// event records an event when a Recorder is configured; the note is an
// argument, never a format, cut to what the API accepts.
func (r *Reconciler[T]) event(obj T, eventType, reason, action, note string) {
	if r.opts.Recorder == nil {
		return
	}
	r.opts.Recorder.Eventf(obj, nil, eventType, reason, action, "%s", text.Truncate(note, eventNoteLimit, "…"))
}

// removeFinalizer removes Options.Finalizer and the retired finalizers
// from obj, in one patch, noting its UID first so that DeletedWithFinalizer
// does not run the cleanup again when the removal deletes the object (see
// bypassed).
func (r *Reconciler[T]) removeFinalizer(ctx context.Context, c client.Client, obj T) (changed bool, err error) {
	done := r.bypassed.releasing(obj.GetUID())
	defer func() { done(changed && err == nil) }()
	return finalizer.RemoveAll(ctx, c, obj, r.managedFinalizers(), finalizer.WithAPIReader(r.opts.APIReader))
}
