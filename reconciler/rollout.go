package reconciler

import (
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Reasons of the outcomes [Scope.Rollout] returns, besides the reasons
// kstatus reports for a failed object (ProgressDeadlineExceeded, JobFailed,
// …).
const (
	// ReasonCurrent: the object is fully rolled out (kstatus Current).
	ReasonCurrent = "Current"
	// ReasonInProgress: the object's controller has not finished rolling
	// out its latest generation (kstatus InProgress).
	ReasonInProgress = "InProgress"
	// ReasonTerminating: the object is being deleted.
	ReasonTerminating = "Terminating"
	// ReasonFailed: kstatus reports the object Failed without a reason.
	ReasonFailed = "Failed"
)

// StalledRecheck is how long after a stall that can heal unseen the
// reconciler looks again: an owned object kstatus judges Failed, and an
// adoption refused (ReasonAdoptionRefused). A step overrides it with
// .RequeueAfter(d) on its outcome; .RequeueAfter(0) makes the stall purely
// terminal.
const StalledRecheck = 5 * time.Minute

// DefaultRolloutProgressInterval is Options.RolloutProgressInterval's
// default: a status that follows a rollout's progress is at most this old.
const DefaultRolloutProgressInterval = 5 * time.Second

// Rollout returns the outcome obj's rollout calls for, as kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute) judges it, for an
// object the step read itself (Deployment, StatefulSet, DaemonSet, Job, or
// any object with a Ready condition or observedGeneration);
// [Scope.ApplyAndWait] applies and returns this for the object the apply left:
//
//   - Current: ContinueWith, reason Current, kstatus's message.
//   - InProgress, including a status that has not observed the object's
//     generation: Wait, reason InProgress.
//   - Failed: Terminal with kstatus's reason (a Deployment's
//     ProgressDeadlineExceeded; ReasonFailed without one), re-checked after
//     [StalledRecheck].
//   - Terminating: Wait, reason Terminating.
//
// A pass that ends on this Wait waits for the rollout to end: until the
// owner's next pass, status updates of obj that leave it InProgress start
// at most one pass per Options.RolloutProgressInterval.
func (s *Scope[T]) Rollout(obj client.Object) Outcome {
	gvk, err := apiutil.GVKForObject(obj, s.applier.Scheme)
	if err != nil {
		return Retry(fmt.Errorf("rollout: %T: %w", obj, err))
	}
	res, err := computeStatus(obj, gvk)
	if err != nil {
		return Retry(fmt.Errorf("computing the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err))
	}
	name := fmt.Sprintf("%s %s", gvk.Kind, obj.GetName())
	switch res.Status {
	case status.CurrentStatus:
		return ContinueWith(ReasonCurrent, "%s", res.Message)
	case status.InProgressStatus:
		s.waits = append(s.waits, waited{gk: gvk.GroupKind(), key: client.ObjectKeyFromObject(obj),
			uid: obj.GetUID(), generation: obj.GetGeneration()})
		return Wait(ReasonInProgress, "%s: %s", name, res.Message)
	case status.TerminatingStatus:
		return Wait(ReasonTerminating, "%s: %s", name, res.Message)
	case status.FailedStatus:
		reason := ReasonFailed
		msg := res.Message
		for _, c := range res.Conditions {
			if c.Type == status.ConditionStalled && c.Reason != "" {
				reason = c.Reason
				if c.Message != "" {
					msg += ": " + c.Message
				}
			}
		}
		return Terminal(reason, errors.New(name+": "+msg)).RequeueAfter(StalledRecheck)
	default:
		return Retry(fmt.Errorf("%s: status %s: %s", name, res.Status, res.Message))
	}
}
