package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/reconcilekit/reconcilekit/ownership"
)

// ApplyAndWaitFor is [Scope.ApplyAndWait] for a kind whose readiness
// kstatus does not judge (kstatus calls a ResourceQuota, a Namespace or a
// ConfigMap Current as soon as it exists): ready decides instead, on the
// live object as the apply left it. It returns Continue (reason
// Current, ready's message) when ready says so, Wait (reason InProgress,
// the message naming the object) while it does not, and Wait (reason
// Terminating) while the object is being deleted, without asking ready.
//
// ready gets live, of desired's kind, and must not change it; for
// example, a ResourceQuota is enforced once the quota controller has
// filled status.hard:
//
//	func(o client.Object) (bool, string) {
//		if len(o.(*corev1.ResourceQuota).Status.Hard) == 0 {
//			return false, "waiting for the quota controller"
//		}
//		return true, "quota enforced"
//	}
//
// Like ApplyAndWait's Wait, its Wait is woken by the Owns watch of the
// kind: a change to the object's status starts the next pass.
func (s *Scope[T]) ApplyAndWaitFor(ctx context.Context, desired runtime.ApplyConfiguration, live client.Object,
	ready func(live client.Object) (ready bool, message string), opts ...ownership.ApplyOption) Outcome {
	if ready == nil {
		return Retry(fmt.Errorf("ApplyAndWaitFor: ready is nil (use ApplyAndWait for kstatus's judgement)"))
	}
	return s.applyAndJudge(ctx, desired, live, func(live client.Object) Outcome {
		name := fmt.Sprintf("%s %s", gvkKind(s.applier.Scheme, live), client.ObjectKeyFromObject(live))
		if live.GetDeletionTimestamp() != nil {
			return Wait(ReasonTerminating, "%s is being deleted", name)
		}
		ok, msg := ready(live)
		if !ok {
			return Wait(ReasonInProgress, "%s: %s", name, msg)
		}
		return ContinueWith(ReasonCurrent, "%s", msg)
	}, opts)
}

// gvkKind is obj's kind as scheme knows it, its Go type otherwise.
func gvkKind(scheme *runtime.Scheme, obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}
