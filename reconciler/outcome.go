package reconciler

import (
	"errors"
	"fmt"
	"time"

	"github.com/reconcilekit/reconcilekit/ownership"
)

type outcomeKind int

const (
	kindContinue outcomeKind = iota
	kindWait
	kindTerminal
	kindError
)

// Default condition reasons the reconciler writes for a step's condition
// when the step does not choose one.
const (
	// ReasonError is the reason of a step's condition when the step returned
	// a transient error.
	ReasonError = "ReconcileError"
	// ReasonPanic is the reason of a step's condition when the step panicked.
	ReasonPanic = "Panic"
	// ReasonPaused is the reason of the Paused condition.
	ReasonPaused = "PausedByAnnotation"
	// ReasonInvalidStep stalls a pass whose step changed the object outside
	// its status, labels and annotations, or applied or pruned a kind
	// Options.Owns does not declare: a bug in the step, which no retry can
	// fix.
	ReasonInvalidStep = "InvalidStep"
	// ReasonAdoptionRefused stalls a pass whose step could not apply an
	// owned object because an object by that name exists that the owner may
	// not take over (ownership.AdoptionRefusedError): someone must delete
	// or rename it.
	ReasonAdoptionRefused = "AdoptionRefused"
)

// Outcome is what a step returns: whether the pass goes on, and what the
// step's condition says. Build one with [Continue], [ContinueWith], [Wait],
// [Terminal] or [Retry]; the zero value is Continue.
type Outcome struct {
	kind    outcomeKind
	after   time.Duration
	reason  string
	message string
	err     error
}

// Continue lets the pass go on to the next step. The step's condition, if
// it has one, becomes True with reason Succeeded.
func Continue() Outcome { return Outcome{} }

// ContinueWith is Continue with the reason and message of the step's
// condition chosen by the step (for example "Available", "3/3 replicas
// ready").
func ContinueWith(reason, messageFormat string, args ...any) Outcome {
	return Outcome{reason: reason, message: fmt.Sprintf(messageFormat, args...)}
}

// Wait stops the pass without an error because something is not ready yet
// (a dependency missing, a rollout in progress). The step's condition becomes
// False with reason and message, Reconciling becomes True, and nothing is
// retried until a watch fires, or until [Outcome.RequeueAfter] elapses.
func Wait(reason, messageFormat string, args ...any) Outcome {
	return Outcome{kind: kindWait, reason: reason, message: fmt.Sprintf(messageFormat, args...)}
}

// Terminal stops the pass because of an error that no retry can fix (an
// invalid spec, a reference to something that can never exist). The step's
// condition becomes False with reason and the error, Stalled becomes True,
// and the object is not requeued: the next pass happens when it changes.
// With [Outcome.RequeueAfter], the object is still Stalled but looked at again
// after the duration, for a failure that can heal without a change anyone
// watches.
func Terminal(reason string, err error) Outcome {
	return Outcome{kind: kindTerminal, reason: reason, err: nonNil(err, "Terminal")}
}

// Retry stops the pass with a transient error (a conflict, a timeout, an
// unreachable dependency). The step's condition becomes False with reason
// ReconcileError, Reconciling becomes True, and controller-runtime retries
// with exponential backoff.
func Retry(err error) Outcome {
	return Outcome{kind: kindError, reason: ReasonError, err: nonNil(err, "Retry")}
}

// nonNil returns err, or, for a step that passed a nil error to an outcome
// that stops the pass, an error that says so: the pass still fails, with a
// message pointing at the bug.
func nonNil(err error, outcome string) error {
	if err == nil {
		return fmt.Errorf("the step returned reconciler.%s with a nil error", outcome)
	}
	return err
}

// After asks for another pass after d. On a Continue outcome the pass goes
// on and the whole pass is requeued after the shortest duration any step
// asked for (periodic checks of something no watch can see); on a Wait it
// polls. On a live step's Terminal it is a slow re-check: the object is
// Stalled, and the pass returns a requeue after d instead of a terminal
// error (which controller-runtime never retries); RequeueAfter(0) takes it back.
// It has no effect on Retry (backoff decides) nor on a cleanup step's
// Terminal.
func (o Outcome) RequeueAfter(d time.Duration) Outcome {
	o.after = d
	return o
}

// WithReason overrides the condition reason of a Retry outcome (or any
// other).
func (o Outcome) WithReason(reason string) Outcome {
	o.reason = reason
	return o
}

// stallRefusedAdoption turns a step's Retry outcome whose error is an
// ownership.AdoptionRefusedError into Terminal with ReasonAdoptionRefused,
// re-checked after [StalledRecheck]: no retry with backoff makes the object
// adoptable, so the object is Stalled, and the error, in its message,
// names the object; but its owner may delete it, and no event of a kind
// the controller watches would say so. An *UndeclaredKindError, a bug
// in the controller no retry fixes either, stalls it with
// ReasonInvalidStep.
func stallRefusedAdoption(o Outcome) Outcome {
	var refused *ownership.AdoptionRefusedError
	var undeclared *UndeclaredKindError
	switch {
	case o.kind != kindError:
	case errors.As(o.err, &refused):
		return Terminal(ReasonAdoptionRefused, o.err).RequeueAfter(StalledRecheck)
	case errors.As(o.err, &undeclared):
		return Terminal(ReasonInvalidStep, o.err)
	}
	return o
}

func (o Outcome) stops() bool { return o.kind != kindContinue }

func (o Outcome) conditionMessage() string {
	if o.err != nil {
		return o.err.Error()
	}
	return o.message
}
