package ownership

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ForeignControllerError is returned by Apply when the live object (or the
// desired object as passed in) is controlled by another owner. Apply refuses
// to adopt it: two controllers would fight over it, and the other owner's
// deletion would garbage-collect an object we rely on.
//
// Match it with errors.As. It is usually a configuration error (two owners
// generating the same name) that retrying will not fix, so reconcilers
// typically surface it in a status condition rather than requeue quickly.
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
		e.Kind, e.Key, e.Owner.Kind, e.Owner.Name, e.Owner.UID,
		e.Controller.Kind, e.Controller.Name, e.Controller.UID)
}
