package finalizer

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/text"
)

// Event reasons emitted by [Finalizer.Finalize]. ReasonCleanupFailed is also
// the reason of the Ready=False condition set on a failed step. They are
// stable so that alerts and tests can match on them.
const (
	// ReasonCleanupFailed (Warning): a cleanup step returned an error.
	ReasonCleanupFailed = "CleanupFailed"
	// ReasonCleanupOverdue (Warning): the object has been terminating for
	// longer than [Finalizer.Deadline]; emitted on every pass until it is
	// gone, naming the step that holds it.
	ReasonCleanupOverdue = "CleanupOverdue"
	// ReasonFinalizerForceRemoved (Warning): cleanup did not finish by the
	// deadline and [Finalizer.RemoveAfterDeadline] removed the finalizer
	// anyway; whatever the failing step should have cleaned up may be left
	// behind.
	ReasonFinalizerForceRemoved = "FinalizerForceRemoved"
	// ReasonCleanupSucceeded (Normal): all steps succeeded and the finalizer
	// was removed.
	ReasonCleanupSucceeded = "CleanupSucceeded"
)

// Event actions, the events.k8s.io/v1 "action" field.
const (
	actionCleanup         = "Cleanup"
	actionRemoveFinalizer = "RemoveFinalizer"
)

// noteLimit is the longest note events.k8s.io/v1 accepts; longer events are
// rejected by the API server and would be lost.
const noteLimit = 1024

// Result is the outcome of one cleanup step or one [Finalizer.Finalize] pass.
// The zero value means "done, go on".
type Result struct {
	// RequeueAfter, when positive, means "not finished yet, look again after
	// this long" — e.g. an external deletion was started and is still in
	// progress. It is not an error and emits no Warning.
	RequeueAfter time.Duration
}

// Step is one named cleanup action of a [Finalizer].
//
// Run must be idempotent: every pass starts again from the first step, so a
// step runs again after a later step failed or asked to requeue, and again
// after a crash between its success and the finalizer's removal. Typically it
// deletes something and treats "already gone" as success.
type Step[T client.Object] struct {
	// Name identifies the step in events, conditions and errors; it must be
	// non-empty and unique within the Finalizer.
	Name string
	// Run performs the step on obj. Return a Result with RequeueAfter > 0 to
	// wait for something without failing, or an error to fail the step.
	Run func(ctx context.Context, obj T) (Result, error)
}

// Finalizer runs ordered cleanup steps while its finalizer is present on an
// object that is being deleted, and removes the finalizer only after all of
// them succeeded, so that the object cannot disappear before its external
// resources do.
//
// Add the finalizer with [Ensure] (using the same Name) when the object is
// not being deleted, and call [Finalizer.Finalize] when it is.
//
// Guarantees:
//   - The finalizer is removed only after every step succeeded in the same
//     pass, or — only when RemoveAfterDeadline is set — once Deadline has
//     passed, with a Warning event saying so.
//   - Failure is never silent: a failed step sets Ready=False (reason
//     CleanupFailed) on objects implementing conditions.Setter, emits a
//     Warning event and returns an error naming the step; past Deadline every
//     pass also emits CleanupOverdue with how long the object has been stuck.
//   - The finalizer is removed with [Remove], so spec, status and other
//     controllers' finalizers are never overwritten.
//
// Caveats:
//   - Steps must be idempotent (see [Step]).
//   - Deadline is measured from the object's deletionTimestamp, which has
//     one-second precision.
//   - A Finalizer is configuration: do not change it while Finalize runs.
type Finalizer[T client.Object] struct {
	// Name is the finalizer, a domain-qualified name such as
	// "apps.example.com/cleanup".
	Name string
	// Client writes the finalizer removal.
	Client client.Client
	// APIReader re-reads the object when removing the finalizer meets a
	// conflict; see [APIReader]. Set it to mgr.GetAPIReader() whenever
	// Client reads from the manager's cache. Nil re-reads through Client.
	APIReader client.Reader
	// Steps run in order on every pass.
	Steps []Step[T]
	// Recorder receives the events; nil disables them. Use the manager's
	// mgr.GetEventRecorder(name).
	Recorder events.EventRecorder
	// Deadline, when positive, is how long after its deletionTimestamp an
	// object may stay in cleanup before every pass emits a CleanupOverdue
	// Warning.
	Deadline time.Duration
	// RemoveAfterDeadline removes the finalizer once Deadline has passed even
	// though cleanup has not succeeded, emitting FinalizerForceRemoved. It is
	// an explicit policy choice: it unblocks deletion (e.g. of a namespace)
	// at the price of possibly leaking what the failing step manages.
	// It has no effect unless Deadline is positive.
	RemoveAfterDeadline bool
}

// Finalize runs one cleanup pass for obj, which must have a deletionTimestamp.
// It returns done=true once the finalizer is gone from obj (also when it was
// absent to begin with); otherwise res or err says when to try again.
//
// A pass runs the steps in order and stops at the first step that fails or
// asks to requeue, keeping the finalizer:
//   - A step returning RequeueAfter > 0 makes Finalize return that Result
//     with a nil error.
//   - A step returning an error makes Finalize return it wrapped, naming the
//     step; it emits a CleanupFailed Warning and, when obj implements
//     conditions.Setter, sets Ready=False with reason CleanupFailed and
//     message "cleanup step <name>: <err>".
//   - Past Deadline, either case also emits CleanupOverdue; with
//     RemoveAfterDeadline the finalizer is then removed, a
//     FinalizerForceRemoved Warning emitted, and Finalize returns done=true
//     with a nil error.
//
// When all steps succeed the finalizer is removed, a CleanupSucceeded event
// is emitted and Finalize returns done=true.
//
// Caveats:
//   - Finalize changes conditions on obj in memory only: the caller writes
//     status (the reconciler package does so once per pass). After done=true
//     the object may already be gone, so that write may return NotFound.
//   - Calling it for an object without a deletionTimestamp is a programming
//     error and returns an error without running any step.
func (f *Finalizer[T]) Finalize(ctx context.Context, obj T) (done bool, res Result, err error) {
	if err := f.Validate(); err != nil {
		return false, Result{}, err
	}
	deleted := obj.GetDeletionTimestamp()
	if deleted == nil {
		return false, Result{}, fmt.Errorf("finalizer %q: %s is not being deleted; call Finalize only for objects with a deletionTimestamp",
			f.Name, describe(f.Client, obj))
	}
	if !controllerutil.ContainsFinalizer(obj, f.Name) {
		return true, Result{}, nil
	}

	for _, step := range f.Steps {
		res, err := step.Run(ctx, obj)
		switch {
		case err != nil:
			return f.failed(ctx, obj, step.Name, err, deleted.Time)
		case res.RequeueAfter > 0:
			return f.waiting(ctx, obj, step.Name, res, deleted.Time)
		}
	}

	changed, err := Remove(ctx, f.Client, obj, f.Name, APIReader(f.APIReader))
	if err != nil {
		return false, Result{}, fmt.Errorf("finalizer %q: all cleanup steps succeeded: %w", f.Name, err)
	}
	if changed {
		f.event(obj, corev1.EventTypeNormal, ReasonCleanupSucceeded, actionRemoveFinalizer,
			fmt.Sprintf("all %d cleanup steps succeeded; removed finalizer %s", len(f.Steps), f.Name))
	}
	return true, Result{}, nil
}

// failed handles a step that returned cause.
func (f *Finalizer[T]) failed(ctx context.Context, obj T, step string, cause error, deleted time.Time) (bool, Result, error) {
	f.event(obj, corev1.EventTypeWarning, ReasonCleanupFailed, actionCleanup, fmt.Sprintf("cleanup step %s: %v", step, cause))
	forced, forceErr := f.overdue(ctx, obj, deleted, fmt.Sprintf("step %s fails: %v", step, cause))
	// Set the condition after a forced removal, which replaces obj with the
	// server's copy.
	var condErr error
	if setter, ok := any(obj).(conditions.Setter); ok {
		condErr = conditions.MarkFalse(setter, conditions.Ready, ReasonCleanupFailed, "cleanup step %s: %v", step, cause)
	}
	if condErr != nil {
		condErr = fmt.Errorf("finalizer %q: %w", f.Name, condErr)
	}
	if forced {
		// The policy chose deletion over cleanup; the events and the
		// condition report the failure.
		return true, Result{}, condErr
	}
	return false, Result{}, errors.Join(
		fmt.Errorf("finalizer %q: cleanup step %q: %w", f.Name, step, cause), forceErr, condErr)
}

// waiting handles a step that asked to be requeued.
func (f *Finalizer[T]) waiting(ctx context.Context, obj T, step string, res Result, deleted time.Time) (bool, Result, error) {
	forced, err := f.overdue(ctx, obj, deleted, fmt.Sprintf("step %s is still waiting (requeue after %s)", step, res.RequeueAfter))
	if err != nil {
		return false, res, err
	}
	if forced {
		return true, Result{}, nil
	}
	return false, res, nil
}

// overdue emits CleanupOverdue when the deadline has passed and, when
// RemoveAfterDeadline is set, removes the finalizer. forced reports whether
// the finalizer was removed (or already gone).
func (f *Finalizer[T]) overdue(ctx context.Context, obj T, deleted time.Time, holdup string) (forced bool, err error) {
	if f.Deadline <= 0 {
		return false, nil
	}
	stuck := time.Since(deleted)
	if stuck <= f.Deadline {
		return false, nil
	}
	f.event(obj, corev1.EventTypeWarning, ReasonCleanupOverdue, actionCleanup,
		fmt.Sprintf("cleanup has been stuck for %s since deletion (deadline %s): %s", stuck.Round(time.Second), f.Deadline, holdup))
	if !f.RemoveAfterDeadline {
		return false, nil
	}
	changed, err := Remove(ctx, f.Client, obj, f.Name, APIReader(f.APIReader))
	if err != nil {
		return false, fmt.Errorf("finalizer %q: removing after deadline: %w", f.Name, err)
	}
	if changed {
		f.event(obj, corev1.EventTypeWarning, ReasonFinalizerForceRemoved, actionRemoveFinalizer,
			fmt.Sprintf("removed finalizer %s without completing cleanup, %s after deletion (deadline %s): %s; resources it guards may be left behind",
				f.Name, stuck.Round(time.Second), f.Deadline, holdup))
	}
	return true, nil
}

// event records an event when a Recorder is configured. The note is passed
// as an argument, never as a format, and truncated to what the API accepts.
func (f *Finalizer[T]) event(obj T, eventType, reason, action, note string) {
	if f.Recorder == nil {
		return
	}
	f.Recorder.Eventf(obj, nil, eventType, reason, action, "%s", truncate(note, noteLimit))
}

// Validate reports configuration errors, naming the field: an invalid or
// unqualified Name, a nil Client, a step without a name, with a duplicate
// name or without Run. Finalize calls it on every pass; call it where the
// Finalizer is built to fail at start-up instead.
func (f *Finalizer[T]) Validate() error {
	if err := validateName(f.Name, true); err != nil {
		return fmt.Errorf("finalizer: Name: %w", err)
	}
	if f.Client == nil {
		return fmt.Errorf("finalizer %q: Client is nil", f.Name)
	}
	seen := make(map[string]bool, len(f.Steps))
	for i, s := range f.Steps {
		switch {
		case s.Name == "":
			return fmt.Errorf("finalizer %q: Steps[%d].Name is empty", f.Name, i)
		case seen[s.Name]:
			return fmt.Errorf("finalizer %q: Steps[%d].Name %q is not unique", f.Name, i, s.Name)
		case s.Run == nil:
			return fmt.Errorf("finalizer %q: Steps[%d] (%s).Run is nil", f.Name, i, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// truncate shortens an event note to n bytes on a rune boundary.
func truncate(s string, n int) string { return text.Truncate(s, n, "…") }
