package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Prune deletes the objects of list's type in owner's namespace (in every
// namespace, for a cluster-scoped owner) that owner controls and whose
// names are not in keep, and returns the names it deleted, sorted. Objects
// not controlled by owner are never touched, and objects already being
// deleted are skipped. Each delete has Background propagation and a UID
// precondition, so an object re-created under the same name since the list
// is left alone; one failed delete does not stop the others (the errors are
// joined).
func (a *Applier) Prune(ctx context.Context, owner client.Object, list client.ObjectList, keep ...string) ([]string, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	if owner.GetUID() == "" {
		return nil, fmt.Errorf("prune: owner %s has no UID: pass the object read from the API server", describe("", owner))
	}
	if err := a.Client.List(ctx, list, client.InNamespace(owner.GetNamespace())); err != nil {
		return nil, fmt.Errorf("prune: listing %T in namespace %q: %w", list, owner.GetNamespace(), err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("prune: %T: %w", list, err)
	}
	var deleted []string
	var errs []error
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return deleted, fmt.Errorf("prune: list item %T is not a client.Object", item)
		}
		if slices.Contains(keep, obj.GetName()) || !metav1.IsControlledBy(obj, owner) || obj.GetDeletionTimestamp() != nil {
			continue
		}
		uid := obj.GetUID()
		err := a.Client.Delete(ctx, obj,
			client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &uid})
		switch {
		case err == nil:
			deleted = append(deleted, obj.GetName())
			a.learned().verdicts.forget(uid)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone already, or replaced by a newer object with the same name.
		default:
			errs = append(errs, fmt.Errorf("prune: deleting %s: %w", describe(gvkKind(a.Scheme, obj), obj), err))
		}
	}
	slices.Sort(deleted)
	return deleted, errors.Join(errs...)
}

func gvkKind(s *runtime.Scheme, obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}

// describe names an object as `Kind namespace/name` for errors and logs.
func describe(kind string, obj client.Object) string {
	key := client.ObjectKeyFromObject(obj).String()
	if kind == "" {
		return key
	}
	return kind + " " + key
}
