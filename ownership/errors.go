package ownership

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ForeignControllerError is returned by Apply when the live object (or the
// desired object as passed in) is controlled by another owner: Apply
// refuses to adopt it, since two controllers would fight over it and the
// other owner's deletion would garbage-collect an object we rely on. Match
// it with errors.As; it is usually a configuration error (two owners
// generating the same name) that retrying will not fix.
type ForeignControllerError struct {
	// Kind and Key name the object Apply was asked to apply.
	Kind string
	Key  client.ObjectKey
	// Owner is the owner passed to Apply.
	Owner metav1.OwnerReference
	// Controller is the controller reference found on the object.
	Controller metav1.OwnerReference
}

func (e *ForeignControllerError) Error() string {
	return fmt.Sprintf("refusing to adopt %s %s for %s %q (uid %s): it is controlled by %s %q (uid %s)",
		e.Kind, objectKey(e.Key), e.Owner.Kind, e.Owner.Name, e.Owner.UID,
		e.Controller.Kind, e.Controller.Name, e.Controller.UID)
}

// AdoptionRefusedError is returned by Apply when the object exists without
// a controller, nothing on it ties it to the owner (an owner reference
// with the owner's UID, or the configuration hash FieldManager recorded
// when it last applied this configuration for this owner; for a [NotOwned]
// apply: FieldManager never wrote it), and Apply was not given [Adopt]:
// adopting it would hand it to whoever may create the owner, whose
// deletion would then delete it. That FieldManager wrote it, for another
// owner or for none, is not enough. Match it with errors.As. No retry
// fixes it (delete or rename the object, or pass Adopt): a
// reconciler.Scope step that returns it as reconciler.Retry stalls the
// pass (reason AdoptionRefused).
type AdoptionRefusedError struct {
	// Kind and Key name the object Apply was asked to apply.
	Kind string
	Key  client.ObjectKey
	// Owner is the owner passed to Apply.
	Owner metav1.OwnerReference
	// FieldManager is the Applier's field manager, which never wrote the
	// object, or wrote it but not for Owner.
	FieldManager string

	// wrote says FieldManager wrote the object (for another owner, or
	// for none), for the message.
	wrote bool
}

func (e *AdoptionRefusedError) Error() string {
	state := fmt.Sprintf("field manager %q never wrote it", e.FieldManager)
	if e.wrote {
		state = fmt.Sprintf("field manager %q wrote it, but not for this owner: "+
			"no owner reference with its uid, and not the configuration it last applied for it", e.FieldManager)
	}
	return fmt.Sprintf("refusing to adopt %s %s for %s %q (uid %s): it exists without a controller and %s; "+
		"delete or rename it, or apply with ownership.Adopt() to take it over",
		e.Kind, objectKey(e.Key), e.Owner.Kind, e.Owner.Name, e.Owner.UID, state)
}

// objectKey is namespace/name, or the name of a cluster-scoped object.
func objectKey(k client.ObjectKey) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.String()
}
