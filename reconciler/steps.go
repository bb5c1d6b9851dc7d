package reconciler

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
)

// runSteps runs the steps, marks their conditions and the kstatus
// conditions, and returns the pass's result and error.
func (r *Reconciler[T]) runSteps(ctx context.Context, s *Scope[T], p *pass[T]) (ctrl.Result, error) {
	var res ctrl.Result
	var stopped Outcome
	var stoppedBy string
	for _, step := range r.opts.Steps {
		s.waits = s.waits[:0]
		before := snapshotStatus(s.Object)
		pending := ownMetadataDelta(p.orig, s.Object)
		out := r.runStep(ctx, step, s)
		if p.wroteItself() {
			// The step wrote the object itself through the API (another
			// finalizer, an annotation) and s.Object holds the server's
			// answer: that is stored, so it is the new baseline, and the
			// pass's status and earlier steps' labels and annotations go
			// back on top of it.
			p.rebase(before, s.stored(p.orig))
			pending.applyTo(s.Object, true)
		}
		if path := changedOutsideStatusAndOwnMetadata(p.orig, s.Object); path != "" {
			// Only status is written, so the change would be dropped
			// silently; fail loudly instead, naming the step and field.
			copyOutsideStatus(p.orig, s.Object)
			out = Terminal(ReasonInvalidStep, fmt.Errorf("step %s changed %s; steps may change only the object's status, "+
				"labels and annotations, other changes are never written", step.Name, path))
		}
		if err := r.markStep(s.Object, step, out); err != nil {
			return res, err
		}
		if out.after > 0 && (res.RequeueAfter == 0 || out.after < res.RequeueAfter) && out.kind != kindTerminal && out.kind != kindError {
			res.RequeueAfter = out.after
		}
		if out.stops() {
			stopped, stoppedBy = out, step.Name
			break
		}
	}
	if stopped.kind == kindWait && stopped.reason == ReasonInProgress {
		// The pass waits on the rollouts the stopping step judged.
		p.waits = slices.Clone(s.waits)
	}
	obj := s.Object
	// Reconciling or Stalled, and Ready when it would otherwise say True,
	// name the step that stopped the pass.
	msg := fmt.Sprintf("step %s: %s", stoppedBy, stopped.conditionMessage())
	var stepErr error
	switch stopped.kind {
	case kindContinue:
		conditions.Delete(obj, conditions.Reconciling)
		conditions.Delete(obj, conditions.Stalled)
	case kindWait, kindError:
		conditions.Delete(obj, conditions.Stalled)
		if err := conditions.MarkTrue(obj, conditions.Reconciling, stopped.reason, "%s", msg); err != nil {
			return res, err
		}
		if stopped.kind == kindError {
			stepErr = fmt.Errorf("step %s: %w", stoppedBy, stopped.err)
			// controller-runtime ignores a result returned with an error
			// (and warns on every retry); the error's backoff decides.
			res = ctrl.Result{}
		}
	case kindTerminal:
		conditions.Delete(obj, conditions.Reconciling)
		if err := conditions.MarkTrue(obj, conditions.Stalled, stopped.reason, "%s", msg); err != nil {
			return res, err
		}
		if stopped.after > 0 {
			// A failure that can heal by itself: Stalled, and re-checked.
			res = ctrl.Result{RequeueAfter: min(stopped.after, cmp.Or(res.RequeueAfter, stopped.after))}
			break
		}
		stepErr = reconcile.TerminalError(fmt.Errorf("step %s: %w", stoppedBy, stopped.err))
		res = ctrl.Result{}
	}
	if err := r.summary.SetReady(obj); err != nil {
		return res, err
	}
	// Ready always says what is ready: with no dependent to mirror (or one
	// that said nothing), the pass itself is what succeeded.
	if ready := conditions.Get(obj, conditions.Ready); ready != nil && ready.Status == metav1.ConditionTrue && ready.Message == "" {
		if err := conditions.MarkTrue(obj, conditions.Ready, ready.Reason, "all %d steps succeeded", len(r.opts.Steps)); err != nil {
			return res, err
		}
	}
	// The steps after the one that stopped did not run, so their conditions
	// may still say True for an older generation: a pass that did not finish
	// is never Ready, or `kubectl wait --for=condition=Ready` would return
	// before this generation is rolled out.
	if stopped.kind != kindContinue && conditions.IsTrue(obj, conditions.Ready) {
		if err := conditions.MarkFalse(obj, conditions.Ready, stopped.reason, "%s", msg); err != nil {
			return res, err
		}
	}
	if r.opts.DeriveStatus != nil {
		r.opts.DeriveStatus(obj)
	}
	setObservedGeneration(obj)
	return res, stepErr
}

// runStep runs one step with its logger, metrics and panic recovery.
func (r *Reconciler[T]) runStep(ctx context.Context, step Step[T], s *Scope[T]) (out Outcome) {
	log := logf.FromContext(ctx).WithValues("step", step.Name)
	ctx = logf.IntoContext(ctx, log)
	start := time.Now()
	defer func() {
		stepDuration.WithLabelValues(r.opts.Name, step.Name).Observe(time.Since(start).Seconds())
		if p := recover(); p != nil {
			log.Error(fmt.Errorf("panic: %v", p), "step panicked", "stack", string(debug.Stack()))
			out = Retry(fmt.Errorf("panic: %v", p)).WithReason(ReasonPanic)
			stepErrors.WithLabelValues(r.opts.Name, step.Name, "panic").Inc()
			return
		}
		switch out.kind {
		case kindError:
			stepErrors.WithLabelValues(r.opts.Name, step.Name, "transient").Inc()
			log.V(1).Info("step failed", "error", out.err.Error())
		case kindTerminal:
			stepErrors.WithLabelValues(r.opts.Name, step.Name, "terminal").Inc()
			log.Info("step failed permanently", "reason", out.reason, "error", out.err.Error())
		case kindWait:
			log.V(1).Info("step waiting", "reason", out.reason, "message", out.message)
		}
	}()
	return stallRefusedAdoption(step.Run(ctx, s))
}

// markStep sets the step's own condition from its outcome.
func (r *Reconciler[T]) markStep(obj T, step Step[T], out Outcome) error {
	if step.Condition == "" {
		return nil
	}
	var err error
	switch out.kind {
	case kindContinue:
		reason := out.reason
		if reason == "" {
			reason = conditions.ReasonSucceeded
		}
		err = conditions.MarkTrue(obj, step.Condition, reason, "%s", out.message)
	default:
		err = conditions.MarkFalse(obj, step.Condition, out.reason, "%s", out.conditionMessage())
	}
	if err != nil {
		return fmt.Errorf("step %s: condition %s: %w", step.Name, step.Condition, err)
	}
	return nil
}
