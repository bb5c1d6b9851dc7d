package ownership

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NotOwned makes Apply write the object without a controller reference to
// the owner, for an object that must outlive it (an archive, a backup kept
// after the owner is deleted): the garbage collector leaves it alone, and
// Prune never deletes it. Everything else is as for an owned object: the
// same compare-then-write (Unchanged, no request, when the live object
// matches), and the same rules for an existing object (one without a
// controller is taken only if FieldManager wrote it, or with [Adopt]; one
// controlled by another owner is a *ForeignControllerError).
//
// The object may be in any namespace, since no owner reference has to
// point across: an empty namespace defaults to the owner's, and must be set
// for a namespaced object of a cluster-scoped owner. An object this owner
// controlled before is released: the next apply drops our controller
// reference.
func NotOwned() ApplyOption {
	return func(o *options) { o.notOwned = true }
}

// setUnownedNamespace defaults an empty namespace in desired's metadata md
// to the owner's, for an object Apply does not make owned.
func (a *Applier) setUnownedNamespace(owner client.Object, md map[string]any, gvk schema.GroupVersionKind) error {
	path := field.NewPath("metadata", "namespace")
	namespaced, err := apiutil.IsGVKNamespaced(gvk, a.Client.RESTMapper())
	if err != nil {
		return fmt.Errorf("finding the scope of %s: %w", gvk, err)
	}
	ns := stringAt(md, "namespace")
	switch {
	case !namespaced && ns != "":
		return field.Invalid(path, ns, fmt.Sprintf("%s is cluster-scoped", gvk.Kind))
	case !namespaced, ns != "":
	case owner.GetNamespace() == "":
		return field.Required(path, "owner is cluster-scoped, so the namespace cannot be defaulted")
	default:
		md["namespace"] = owner.GetNamespace()
	}
	return nil
}
