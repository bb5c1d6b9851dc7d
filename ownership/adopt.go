package ownership

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Adopt lets Apply take over an existing object that has no controller,
// whoever created it: Apply adds our controller reference to it, so the
// garbage collector deletes it with the owner.
//
// Without it Apply adopts such an object only if the Applier's
// FieldManager has written it before (an object this operator created, whose
// controller reference someone removed, or an older release left without
// one), and otherwise returns an *AdoptionRefusedError. Pass Adopt only
// when the name cannot come from a user who may create owners but not the
// object itself: with a name taken from the owner's spec, Adopt lets that
// user take over, and then delete, an object they do not own.
func Adopt() ApplyOption {
	return func(o *options) { o.adopt = true }
}

// wroteBy reports whether manager has an entry in obj's managedFields:
// this operator wrote the object (which needs the right to write it).
func wroteBy(obj client.Object, manager string) bool {
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == manager {
			return true
		}
	}
	return false
}

// onlyManager reports whether the object in answer, as the API server
// returned it, has no managedFields entry of a manager other than manager:
// nobody else has written it.
func onlyManager(answer map[string]any, manager string) bool {
	md, _ := answer["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	for _, e := range entries {
		if m, _ := e.(map[string]any); stringAt(m, "manager") != manager {
			return false
		}
	}
	return true
}

// replaced reports whether err is the API server refusing an apply that
// names the object's UID because that object is gone (Conflict: "uid
// mismatch") or another object now has its name (Invalid: metadata.uid is
// immutable). A forced apply has no field conflicts, so a Conflict can only
// be that precondition.
func replaced(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}
