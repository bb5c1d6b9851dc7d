package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reconcilekit/reconcilekit/finalizer"
)

// syncFinalizers brings a live object's finalizers to what this release
// uses: Options.Finalizer ensured (when Cleanup is set), then every retired
// finalizer removed, in one more write. Ours goes first, so an object whose
// finalizer was renamed is never unguarded. On a write or a re-read, obj
// holds the server's copy; when that copy is deleting, the retired ones are
// left to the deletion path (which, with Cleanup, runs the cleanup before
// it removes them).
func (r *Reconciler[T]) syncFinalizers(ctx context.Context, c client.Client, obj T) (changed bool, err error) {
	if len(r.opts.Cleanup) > 0 {
		if changed, err = finalizer.Ensure(ctx, c, obj, r.opts.Finalizer, finalizer.WithAPIReader(r.opts.APIReader)); err != nil {
			return false, fmt.Errorf("adding finalizer %s: %w", r.opts.Finalizer, err)
		}
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return changed, nil
	}
	removed, err := r.removeRetired(ctx, c, obj)
	return changed || removed, err
}

// removeRetired removes the Options.RetiredFinalizers obj lists, in one
// locked patch; none listed, nothing is sent.
func (r *Reconciler[T]) removeRetired(ctx context.Context, c client.Client, obj T) (bool, error) {
	var names []string
	for _, name := range r.opts.RetiredFinalizers {
		if controllerutil.ContainsFinalizer(obj, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return false, nil
	}
	changed, err := finalizer.RemoveAll(ctx, c, obj, names, finalizer.WithAPIReader(r.opts.APIReader))
	if err != nil {
		return false, fmt.Errorf("removing retired finalizers: %w", err)
	}
	if changed {
		logf.FromContext(ctx).Info("removed retired finalizers", "finalizers", names)
	}
	return changed, nil
}

// managedFinalizers are the finalizers this reconciler removes from a
// deleting object: its own (with Cleanup) and the retired ones.
func (r *Reconciler[T]) managedFinalizers() []string {
	if len(r.opts.Cleanup) == 0 {
		return r.opts.RetiredFinalizers
	}
	return append([]string{r.opts.Finalizer}, r.opts.RetiredFinalizers...)
}

// heldFinalizers are the finalizers among managedFinalizers that obj lists,
// in that order: with Cleanup, those that hold its cleanup (a deleting
// object that lists none has no cleanup to run).
func (r *Reconciler[T]) heldFinalizers(obj T) []string {
	var held []string
	for _, name := range r.managedFinalizers() {
		if controllerutil.ContainsFinalizer(obj, name) {
			held = append(held, name)
		}
	}
	return held
}

// guardsCleanup reports whether obj lists a finalizer that holds its
// cleanup: Options.Finalizer or, since a renamed finalizer still guards
// the cleanup of objects the new name never reached, a retired one. Never
// without Cleanup.
func (r *Reconciler[T]) guardsCleanup(obj T) bool {
	return len(r.opts.Cleanup) > 0 && len(r.heldFinalizers(obj)) > 0
}

// describeFinalizers names finalizers for a message: "finalizer a", or
// "finalizers a, b".
func describeFinalizers(names []string) string {
	if len(names) == 1 {
		return "finalizer " + names[0]
	}
	return "finalizers " + strings.Join(names, ", ")
}

// validateFinalizers checks Finalizer, Cleanup and RetiredFinalizers
// together.
func validateFinalizers[T Object](opts Options[T]) []error {
	var errs []error
	switch {
	case len(opts.Cleanup) > 0 && opts.Finalizer == "":
		errs = append(errs, errors.New("reconciler: Options.Finalizer is required when Options.Cleanup is set"))
	case len(opts.Cleanup) > 0:
		if err := finalizer.ValidateName(opts.Finalizer); err != nil {
			errs = append(errs, fmt.Errorf("reconciler: Options.Finalizer: %w", err))
		}
	case opts.Finalizer != "":
		errs = append(errs, fmt.Errorf("reconciler: Options.Finalizer %q is set but Options.Cleanup is empty: "+
			"no cleanup would run for it; to stop using a finalizer that earlier releases added, "+
			"list it in Options.RetiredFinalizers instead", opts.Finalizer))
	}
	seen := map[string]bool{}
	for i, name := range opts.RetiredFinalizers {
		field := fmt.Sprintf("reconciler: Options.RetiredFinalizers[%d]", i)
		invalid := validation.IsQualifiedName(name)
		switch {
		case len(invalid) > 0:
			errs = append(errs, fmt.Errorf("%s: invalid finalizer name %q: %s", field, name, strings.Join(invalid, "; ")))
		case name == metav1.FinalizerOrphanDependents || name == metav1.FinalizerDeleteDependents:
			errs = append(errs, fmt.Errorf("%s: %q is the garbage collector's finalizer, not one this operator added", field, name))
		case len(opts.Cleanup) > 0 && name == opts.Finalizer:
			errs = append(errs, fmt.Errorf("%s: %q is Options.Finalizer, which this release still uses", field, name))
		case seen[name]:
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", field, name))
		}
		seen[name] = true
	}
	return errs
}
