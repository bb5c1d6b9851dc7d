package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ReasonDeleted is the reason of the Continue outcome [Scope.DeleteAndWait]
// returns once the object is gone.
const ReasonDeleted = "Deleted"

// notControlledRecheck is how often DeleteAndWait looks again at a deleting
// object s.Object does not control: no watch event maps it to the owner.
const notControlledRecheck = 10 * time.Second

// DeleteOption adjusts one [Scope.DeleteAndWait] call.
type DeleteOption func(*deleteOptions)

type deleteOptions struct {
	notControlled bool
}

// AllowNotControlled lets DeleteAndWait delete an object that s.Object does
// not control (an archive applied with ownership.NotOwned, an object
// another operator left behind). Without it such an object is refused.
func AllowNotControlled() DeleteOption {
	return func(o *deleteOptions) { o.notControlled = true }
}

// DeleteAndWait deletes the object obj names (its kind, namespace and
// name; obj is filled with the live object) and returns Continue (reason
// Deleted) once it is gone, Wait (reason Terminating, naming the
// finalizers still held) while it is being deleted. Every pass may call it
// again: an object already deleting is not deleted twice, and a missing one
// is Continue at once. The delete uses Background propagation and a UID
// precondition, so an object replaced by another of the same name since it
// was read is not deleted.
//
// An object s.Object does not control is refused (Terminal, reason
// ReasonInvalidStep, the error naming it) unless [AllowNotControlled] is
// passed: a name from a spec must not let a user delete what they do not
// own. The kind must be in Options.Owns (an *UndeclaredKindError
// otherwise), whose watch wakes the Wait when the object changes or goes;
// an object not controlled by s.Object is looked at again every ten seconds.
//
// Where Prune deletes what is no longer wanted and moves on, DeleteAndWait
// is for a step that must not go on while the object exists: a cleanup step
// that deletes a Namespace before releasing the owner, say.
func (s *Scope[T]) DeleteAndWait(ctx context.Context, obj client.Object, opts ...DeleteOption) Outcome {
	var o deleteOptions
	for _, opt := range opts {
		opt(&o)
	}
	gvk, err := apiutil.GVKForObject(obj, s.applier.Scheme)
	if err != nil {
		return Retry(fmt.Errorf("delete %T: %w", obj, err))
	}
	if err := s.owned.check(gvk.GroupKind()); err != nil {
		return Retry(err)
	}
	key := client.ObjectKeyFromObject(obj)
	desc := gvk.Kind + " " + key.String()
	gone := ContinueWith(ReasonDeleted, "%s is gone", desc)
	switch err := s.Client.Get(ctx, key, obj); {
	case apierrors.IsNotFound(err):
		return gone
	case err != nil:
		return Retry(fmt.Errorf("delete %s: reading it: %w", desc, err))
	}
	if !o.notControlled && !metav1.IsControlledBy(obj, s.Object) {
		return Terminal(ReasonInvalidStep, fmt.Errorf("delete %s: it is not controlled by %s %s; pass reconciler.AllowNotControlled() to delete it anyway",
			desc, gvkKind(s.applier.Scheme, s.Object), client.ObjectKeyFromObject(s.Object)))
	}
	if obj.GetDeletionTimestamp() == nil {
		uid := obj.GetUID()
		switch err := s.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &uid}); {
		case apierrors.IsNotFound(err):
			return gone
		case err != nil:
			return Retry(fmt.Errorf("delete %s: %w", desc, err))
		}
		// Without finalizers it is gone now; the cache cannot say so yet.
		switch err := s.APIReader.Get(ctx, key, obj); {
		case apierrors.IsNotFound(err):
			return gone
		case err != nil:
			return Retry(fmt.Errorf("delete %s: reading it after the delete: %w", desc, err))
		case obj.GetUID() != uid:
			return gone // and replaced by another object of that name
		}
	}
	wait := Wait(ReasonTerminating, "%s is being deleted%s", desc, heldBy(obj))
	if !metav1.IsControlledBy(obj, s.Object) {
		wait = wait.RequeueAfter(notControlledRecheck)
	}
	return wait
}

// heldBy names the finalizers a deleting object waits for.
func heldBy(obj client.Object) string {
	if f := obj.GetFinalizers(); len(f) > 0 {
		return "; waiting for finalizers " + strings.Join(f, ", ")
	}
	return ""
}
