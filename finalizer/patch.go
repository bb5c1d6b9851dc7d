package finalizer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Option adjusts one [Ensure] or [Remove] call.
type Option func(*options)

type options struct {
	reader client.Reader
}

// WithAPIReader makes [Ensure] and [Remove] read the object through r, which
// should read the apiserver directly (mgr.GetAPIReader()), instead of
// through their client: after a 409 Conflict, and first when obj has no
// resourceVersion. Pass it whenever the client reads from the manager's
// cache (mgr.GetClient()): a cache that has not yet seen the write that
// caused the conflict returns the very copy that conflicted, so re-reading
// through it cannot make progress. WithAPIReader(nil) is the same as no option.
//
// Without it, reads go through the client. That is right for an uncached
// client; with a cache that trails the apiserver, see the caveat on the
// conflict in [Ensure].
func WithAPIReader(r client.Reader) Option {
	return func(o *options) { o.reader = r }
}

// Ensure adds the finalizer name to obj on the server and reports whether it
// changed anything. Call it before creating anything that needs cleanup, so
// that a deletion arriving later waits for that cleanup.
//
// Guarantees:
//   - Only metadata.finalizers is written, as a JSON merge patch carrying
//     obj's resourceVersion (an optimistic lock). Spec, status and other
//     controllers' finalizers are never overwritten, even when obj is stale:
//     a stale obj makes the server answer 409 Conflict, and Ensure re-reads
//     the object — through the reader given with [WithAPIReader], else through
//     c — and tries again (retry.RetryOnConflict with retry.DefaultRetry).
//   - A patch that must fail is never sent: when a re-read returns the
//     resourceVersion that just conflicted, or an older one (a cache that has
//     not caught up), Ensure re-reads again after the backoff instead of
//     patching.
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
//   - When c reads from a cache, pass [WithAPIReader] (mgr.GetAPIReader()).
//     Without it, a conflict is resolved only if the cache catches up within
//     retry.DefaultRetry's few milliseconds; otherwise Ensure returns the
//     Conflict error (apierrors.IsConflict), having sent one patch, and the
//     caller's requeue tries again later.
func Ensure(ctx context.Context, c client.Client, obj client.Object, name string, opts ...Option) (changed bool, err error) {
	if err := validateName(name, true); err != nil {
		return false, fmt.Errorf("adding finalizer to %s: %w", describe(c, obj), err)
	}
	changed, err = patchFinalizers(ctx, c, obj, opts, func(o client.Object) bool {
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
//     status and other controllers' finalizers survive even a stale obj;
//     conflicts are re-read through the [WithAPIReader] reader if one is given.
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
//   - When c reads from a cache, pass [WithAPIReader], as for [Ensure].
func Remove(ctx context.Context, c client.Client, obj client.Object, name string, opts ...Option) (changed bool, err error) {
	return remove(ctx, c, obj, []string{name}, opts)
}

// RemoveAll is [Remove] for several finalizers: it removes every one of
// names that obj lists in one patch, with the same guarantees, and sends
// nothing when obj lists none of them. Use it to retire the finalizers of
// an earlier release at the cost of one write per object.
func RemoveAll(ctx context.Context, c client.Client, obj client.Object, names []string, opts ...Option) (changed bool, err error) {
	return remove(ctx, c, obj, names, opts)
}

func remove(ctx context.Context, c client.Client, obj client.Object, names []string, opts []Option) (bool, error) {
	what := fmt.Sprintf("finalizers %q", names)
	if len(names) == 1 {
		what = fmt.Sprintf("finalizer %q", names[0])
	}
	for _, name := range names {
		if err := validateName(name, false); err != nil {
			return false, fmt.Errorf("removing finalizer from %s: %w", describe(c, obj), err)
		}
	}
	changed, err := patchFinalizers(ctx, c, obj, opts, func(o client.Object) bool {
		removed := false
		for _, name := range names {
			removed = controllerutil.RemoveFinalizer(o, name) || removed
		}
		return removed
	})
	switch {
	case err == nil:
		return changed, nil
	case apierrors.IsNotFound(err), isRecreated(err):
		return false, nil
	default:
		return false, fmt.Errorf("removing %s from %s: %w", what, describe(c, obj), err)
	}
}

// patchFinalizers applies mutate to a copy of obj and, if mutate reports a
// change, sends the difference as a merge patch locked to obj's
// resourceVersion. On conflict it re-reads obj and starts over; a re-read
// that returns the resourceVersion that just conflicted (or an older one) is
// stale, and is read again after the backoff rather than patched.
func patchFinalizers(ctx context.Context, c client.Client, obj client.Object, opts []Option, mutate func(client.Object) bool) (bool, error) {
	if c == nil {
		return false, fmt.Errorf("client is nil")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	reader := client.Reader(c)
	if o.reader != nil {
		reader = o.reader
	}
	uid := obj.GetUID()
	changed := false
	attempt := 0
	// conflict is the last 409 and conflicted the resourceVersion it
	// rejected; no read can make that resourceVersion current again.
	var conflict error
	conflicted := ""
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		attempt++
		// An obj without a resourceVersion (built from a name) cannot lock
		// the patch, so it is read first.
		if attempt > 1 || obj.GetResourceVersion() == "" {
			if err := refresh(ctx, reader, obj, uid); err != nil {
				return err
			}
			if conflict != nil && notNewer(obj.GetResourceVersion(), conflicted) {
				// Still a conflict (so RetryOnConflict reads again), and
				// the final error if the reader never catches up.
				return fmt.Errorf("re-read resourceVersion %s after resourceVersion %s conflicted: the reader trails the apiserver (a cache? pass finalizer.WithAPIReader): %w",
					obj.GetResourceVersion(), conflicted, conflict)
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
			if apierrors.IsConflict(err) {
				conflict, conflicted = err, obj.GetResourceVersion()
			}
			return err
		}
		assign(obj, modified)
		changed = true
		return nil
	})
	return changed, err
}

// notNewer reports whether a read at resourceVersion rv cannot be newer than
// conflicted: the same version, or an older one where versions compare.
func notNewer(rv, conflicted string) bool {
	cmp, err := resourceversion.CompareResourceVersion(rv, conflicted)
	return rv == conflicted || (err == nil && cmp < 0)
}

// refresh replaces obj with the copy r reads.
func refresh(ctx context.Context, r client.Reader, obj client.Object, uid types.UID) error {
	fresh := clone(obj)
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
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

// ValidateName reports whether name can be added by [Ensure]: a qualified
// name with a domain prefix, such as "apps.example.com/cleanup". Call it
// where the name is configured to fail at start-up instead of on every
// Ensure.
func ValidateName(name string) error { return validateName(name, true) }

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
