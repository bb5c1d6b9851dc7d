package finalizer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Ensure adds the finalizer name to obj on the server and reports whether it
// changed anything. Call it before creating anything that needs cleanup, so
// that a deletion arriving later waits for that cleanup.
//
// Guarantees:
//   - Only metadata.finalizers is written, as a JSON merge patch carrying
//     obj's resourceVersion (an optimistic lock). Spec, status and other
//     controllers' finalizers are never overwritten, even when obj is stale:
//     a stale obj makes the server answer 409 Conflict, and Ensure re-reads
//     the object and tries again (retry.RetryOnConflict with
//     retry.DefaultRetry).
//   - Nothing is added to an object that is being deleted: Ensure returns
//     (false, nil) when obj — or the server's copy, if obj is stale — has a
//     deletionTimestamp. Adding a finalizer then would only block a deletion
//     whose cleanup this controller never prepared for.
//   - Nothing is added to a different object that reuses obj's name: if the
//     re-read copy has another UID, Ensure returns an error.
//   - On success, and after any re-read, obj holds the server's copy, so its
//     finalizers and resourceVersion are current.
//
// Caveats:
//   - name must be a domain-qualified name such as "apps.example.com/cleanup";
//     unqualified names can collide with other controllers and with the
//     garbage collector's own "orphan" and "foregroundDeletion" finalizers.
//   - When obj already lists name, Ensure trusts obj and sends no request.
//   - Unsaved in-memory edits to obj are lost when Ensure writes or re-reads:
//     call it before mutating obj, or persist those edits first.
//   - A NotFound error is returned wrapped; use client.IgnoreNotFound.
func Ensure(ctx context.Context, c client.Client, obj client.Object, name string) (changed bool, err error) {
	if err := validateName(name, true); err != nil {
		return false, fmt.Errorf("adding finalizer to %s: %w", describe(c, obj), err)
	}
	changed, err = patchFinalizers(ctx, c, obj, func(o client.Object) bool {
		if o.GetDeletionTimestamp() != nil {
			return false
		}
		return controllerutil.AddFinalizer(o, name)
	})
	if err != nil {
		return false, fmt.Errorf("adding finalizer %q to %s: %w", name, describe(c, obj), err)
	}
	return changed, nil
}

// Remove removes the finalizer name from obj on the server and reports
// whether it changed anything. Removing the last finalizer of an object that
// is being deleted lets the API server delete it.
//
// Guarantees:
//   - The same patch and retry discipline as [Ensure]: only
//     metadata.finalizers is written, with an optimistic lock, so spec,
//     status and other controllers' finalizers survive even a stale obj.
//   - The object being gone (NotFound, or replaced by a new object with the
//     same name and another UID) is not an error: its finalizer is gone too,
//     so Remove returns (false, nil).
//   - On success, and after any re-read, obj holds the server's copy.
//
// Caveats:
//   - When obj does not list name, Remove trusts obj and sends no request.
//   - Unsaved in-memory edits to obj are lost when Remove writes or re-reads.
//   - name only has to be a qualified name, not a domain-qualified one, so
//     that legacy unqualified finalizers can still be cleaned up.
func Remove(ctx context.Context, c client.Client, obj client.Object, name string) (changed bool, err error) {
	if err := validateName(name, false); err != nil {
		return false, fmt.Errorf("removing finalizer from %s: %w", describe(c, obj), err)
	}
	changed, err = patchFinalizers(ctx, c, obj, func(o client.Object) bool {
		return controllerutil.RemoveFinalizer(o, name)
	})
	switch {
	case err == nil:
		return changed, nil
	case apierrors.IsNotFound(err), isRecreated(err):
		return false, nil
	default:
		return false, fmt.Errorf("removing finalizer %q from %s: %w", name, describe(c, obj), err)
	}
}

// patchFinalizers applies mutate to a copy of obj and, if mutate reports a
// change, sends the difference as a merge patch locked to obj's
// resourceVersion. On conflict it re-reads obj and starts over.
func patchFinalizers(ctx context.Context, c client.Client, obj client.Object, mutate func(client.Object) bool) (bool, error) {
	if c == nil {
		return false, fmt.Errorf("client is nil")
	}
	uid := obj.GetUID()
	changed := false
	attempt := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		attempt++
		// An obj without a resourceVersion (built from a name) cannot lock
		// the patch, so it is read first.
		if attempt > 1 || obj.GetResourceVersion() == "" {
			if err := refresh(ctx, c, obj, uid); err != nil {
				return err
			}
		}
		modified := clone(obj)
		if !mutate(modified) {
			return nil
		}
		// The patch is computed from obj to modified, so it holds only the
		// finalizers list and, for the lock, obj's resourceVersion. The
		// client decodes the server's answer into modified (controller-runtime
		// zeroes a decode target first, so nothing of the old copy survives).
		if err := c.Patch(ctx, modified, client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		assign(obj, modified)
		changed = true
		return nil
	})
	return changed, err
}

// refresh replaces obj with the server's copy.
func refresh(ctx context.Context, c client.Client, obj client.Object, uid types.UID) error {
	fresh := clone(obj)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return fmt.Errorf("reading the current object: %w", err)
	}
	if uid != "" && fresh.GetUID() != uid {
		return recreatedError{old: uid, new: fresh.GetUID()}
	}
	assign(obj, fresh)
	return nil
}

// clone deep-copies obj. DeepCopyObject returns the receiver's own type, so
// the assertion holds for every client.Object.
func clone(obj client.Object) client.Object {
	return obj.DeepCopyObject().(client.Object)
}

// assign copies *src into *dst. It lets Ensure and Remove replace obj only
// once they know the server's copy is the same object (same UID). Every
// client.Object is a pointer to a struct (typed, unstructured or
// metadata-only), which is what makes this safe.
func assign(dst, src client.Object) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}

// recreatedError reports that the object was deleted and a new one with the
// same name created while we were patching.
type recreatedError struct{ old, new types.UID }

func (e recreatedError) Error() string {
	return fmt.Sprintf("the object was deleted and re-created (uid %s, now %s)", e.old, e.new)
}

func isRecreated(err error) bool {
	var r recreatedError
	return errors.As(err, &r)
}

// validateName checks a finalizer name the way the API server does
// (a qualified name) and, when qualified is set, also demands a domain prefix.
func validateName(name string, qualified bool) error {
	if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		return fmt.Errorf("invalid finalizer name %q: %s", name, strings.Join(msgs, "; "))
	}
	if qualified && !strings.Contains(name, "/") {
		return fmt.Errorf("invalid finalizer name %q: must be domain-qualified, like %q, to avoid colliding with other controllers' finalizers",
			name, "example.com/"+name)
	}
	return nil
}

// describe names obj for error messages, e.g. "Widget ns/name".
func describe(c client.Client, obj client.Object) string {
	kind := fmt.Sprintf("%T", obj)
	if c != nil {
		if gvk, err := c.GroupVersionKindFor(obj); err == nil && gvk.Kind != "" {
			kind = gvk.Kind
		}
	}
	if ns := obj.GetNamespace(); ns != "" {
		return kind + " " + ns + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}
