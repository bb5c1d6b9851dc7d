package conditions

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons written by [ReadySummary.SetReady] on the Ready condition.
const (
	// ReasonSucceeded is Ready's reason when there are no dependents (unless
	// replaced with [ReadySummary.WithReadyReason]).
	ReasonSucceeded = "Succeeded"
	// ReasonDependencyMissing is Ready's reason (status Unknown) when the
	// first dependent that is not True is absent: the controller has not
	// reported on it yet. The message names the missing type.
	ReasonDependencyMissing = "DependencyMissing"
)

// ReadySummary declares which conditions Ready depends on, like Knative's
// ConditionSet, so that Ready is derived in one place instead of being set by
// hand in every branch of a reconciler (where it drifts from the details).
// The zero value has no dependents. A ReadySummary is immutable and safe to share,
// typically as a package-level variable next to the condition type names.
type ReadySummary struct {
	dependents  []string
	trueReason  string
	trueMessage string
}

// NewReadySummary returns a ReadySummary whose Ready is True only when all dependents
// are True. The order matters: when several dependents are not True, Ready
// reports the first one, so list them in the order a user should fix them.
// Ready, Reconciling and Stalled cannot be dependents ([ReadySummary.SetReady]
// returns an error): Ready would depend on itself, and the kstatus
// conditions are abnormal-true, so "Ready needs Stalled=True" is never meant.
func NewReadySummary(dependents ...string) ReadySummary {
	return ReadySummary{dependents: slices.Clone(dependents)}
}

// Dependents returns a copy of the dependent condition types, in order.
func (s ReadySummary) Dependents() []string { return slices.Clone(s.dependents) }

// WithReadyReason returns a copy of s that, when every dependent is True,
// sets Ready with this reason and message instead of the last dependent's. The reason is validated by SetReady, like any other; an
// empty reason restores the default.
func (s ReadySummary) WithReadyReason(reason, message string) ReadySummary {
	s.trueReason, s.trueMessage = reason, message
	return s
}

// SetReady sets Ready on to from the dependents and returns [Set]'s error.
//
// Guarantees:
//   - All dependents True: Ready=True with the reason and message of the
//     LAST dependent (the last fact established, for example "Available:
//     3/3 replicas ready"), so Ready says what is ready; or the
//     WithReadyReason override. No dependents: Ready=True, reason
//     [ReasonSucceeded], empty message.
//   - Otherwise Ready mirrors the FIRST dependent, in declared order, that is
//     not True: status False if it is False, Unknown if it is Unknown;
//     reason and message copied from it. If that dependent is absent, Ready
//     is Unknown with [ReasonDependencyMissing] and a message naming it.
//   - SetReady goes through Set, so Ready's ObservedGeneration is the object's
//     generation, its LastTransitionTime moves only when its status flips,
//     and applying to an unchanged object changes nothing.
//
// Caveats:
//   - Dependents are compared by status only, not by ObservedGeneration:
//     a dependent left True from an older generation counts as True. Mark
//     every dependent in every reconcile pass (Set stamps the generation),
//     then call SetReady last.
//   - Dependents with an invalid stored reason (written without Set) make
//     SetReady fail, because Ready copies the reason.
func (s ReadySummary) SetReady(to Setter) error {
	for _, d := range s.dependents {
		if d == Ready || d == Reconciling || d == Stalled {
			return fmt.Errorf("conditions: summary of %q on %s: %q cannot be a dependent of %q", Ready, describe(to), d, Ready)
		}
	}
	ready := metav1.Condition{Type: Ready, Status: metav1.ConditionTrue, Reason: ReasonSucceeded}
	if s.trueReason != "" {
		ready.Reason, ready.Message = s.trueReason, s.trueMessage
	}
	current := to.GetConditions()
	if n := len(s.dependents); n > 0 && s.trueReason == "" {
		if last := meta.FindStatusCondition(current, s.dependents[n-1]); last != nil {
			ready.Reason, ready.Message = last.Reason, last.Message
		}
	}
	for _, d := range s.dependents {
		c := meta.FindStatusCondition(current, d)
		if c != nil && c.Status == metav1.ConditionTrue {
			continue
		}
		if c == nil {
			ready.Status, ready.Reason = metav1.ConditionUnknown, ReasonDependencyMissing
			ready.Message = fmt.Sprintf("condition %q has not been reported yet", d)
		} else {
			ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, c.Reason, c.Message
			if c.Status == metav1.ConditionFalse {
				ready.Status = metav1.ConditionFalse
			}
		}
		break
	}
	return Set(to, ready)
}
