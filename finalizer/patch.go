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

// WithAPIReader makes [Ensure] and [Remove] read the object through r,
// which should read the apiserver directly (mgr.GetAPIReader()), instead of
// through their client: after a 409 Conflict, and first when obj has no
// resourceVersion. Pass it whenever the client reads from a cache: a cache
// that has not seen the write that caused the conflict returns the very
// copy that conflicted. WithAPIReader(nil) is the same as no option.
func WithAPIReader(r client.Reader) Option {
	return func(o *options) { o.reader = r }
}

// Ensure adds the finalizer name, a domain-qualified name such as
// "apps.example.com/cleanup", to obj on the server and reports whether it
// changed anything. Call it before creating anything that needs cleanup.
//
// Only metadata.finalizers is written, as a JSON merge patch locked to
// obj's resourceVersion: on a 409 Conflict Ensure re-reads the object
// (through the [WithAPIReader] reader, else through c) and tries again
// (retry.RetryOnConflict), so spec, status and other controllers'
// finalizers are never overwritten, even from a stale obj, and a patch
// certain to conflict is never sent. Nothing is added to an object that is
// being deleted (Ensure returns false, nil) or to a different object that
// reuses obj's name (an error). When obj already lists name, no request is
// sent. After a write or re-read obj holds the server's copy: unsaved edits
// to obj are lost. A NotFound error is returned wrapped. Without
// WithAPIReader, a client that reads from a cache may return the Conflict
// after one patch. docs/finalizer.md has the details.
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
// whether it changed anything; removing the last finalizer of an object that
// is being deleted lets the API server delete it. It writes as [Ensure]
// does, and like it sends nothing when obj does not list name. The object
// being gone (NotFound, or replaced by another UID) is not an error: Remove
// returns false, nil. name only has to be a qualified name, so that legacy
// unqualified finalizers can still be removed.
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
