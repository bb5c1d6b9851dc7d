package reconciler

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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

// StalledRecheck is how long after a pass that stalled on something that
// can heal without a change the controller watches the reconciler looks
// again: an owned object kstatus judges Failed (a Deployment's
// ProgressDeadlineExceeded heals once, say, its image can be pulled, and
// the event may never reach the controller) and an object whose adoption
// was refused (ReasonAdoptionRefused: once its owner deletes it, nothing
// the controller watches says so). Override it per step with .RequeueAfter(d);
// RequeueAfter(0) makes the stall purely terminal.
const StalledRecheck = 5 * time.Minute

// Rollout returns the outcome that obj's rollout calls for, as kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, the library Flux,
// Argo CD and kubectl's apply status use) computes it. obj is an owned
// object read in this pass after applying it (Deployment, StatefulSet,
// DaemonSet, Job, or any object with a Ready condition or observedGeneration):
//
//   - Current: Continue, reason Current, kstatus's message (for example
//     "Deployment is available. Replicas: 3").
//   - InProgress, including a status that has not observed the object's
//     generation yet: Wait, reason InProgress. Ready is not True before the
//     generation we applied is rolled out.
//   - Failed (a Deployment's ProgressDeadlineExceeded, a failed Job): Terminal
//     with kstatus's reason, so the object is Stalled instead of Reconciling
//     forever, re-checked after [StalledRecheck] (or sooner, by a
//     watch event: the owned object changing, or the spec).
//   - Terminating: Wait, reason Terminating.
//
// A pass that ends on this Wait (the step returns it, or another Wait
// with reason InProgress) waits for the rollout to end: until the owner's
// next pass, status updates of obj that leave it InProgress start no pass
// (Options.EveryRolloutEvent).
//
// Because the pass client reads its own writes, a Get after Apply returns
// the applied generation even when the informer cache still holds the
// previous, fully rolled-out one; that is what makes this check safe.
// [Scope.ApplyAndWait] does the apply, the read and this check in one
// call; Rollout is for an object the step reads itself.
func (s *Scope[T]) Rollout(obj client.Object) Outcome {
	u, err := s.unstructured(obj)
	if err != nil {
		return Retry(err)
	}
	res, err := status.Compute(u)
	if err != nil {
		return Retry(fmt.Errorf("computing the status of %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(obj), err))
	}
	name := fmt.Sprintf("%s %s", u.GetKind(), obj.GetName())
	switch res.Status {
	case status.CurrentStatus:
		return ContinueWith(ReasonCurrent, "%s", res.Message)
	case status.InProgressStatus:
		s.waits = append(s.waits, waited{gk: u.GroupVersionKind().GroupKind(), key: client.ObjectKeyFromObject(obj),
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

// unstructured converts obj for kstatus, which picks its rules by group
// and kind.
func (s *Scope[T]) unstructured(obj client.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	gvk, err := apiutil.GVKForObject(obj, s.applier.Scheme)
	if err != nil {
		return nil, fmt.Errorf("rollout: %T: %w", obj, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("rollout: converting %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
