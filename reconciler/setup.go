package reconciler

import (
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// SetupWithManager registers r with mgr as the controller Options.Name,
// reconciling T, watching every kind in Options.Owns (a change to an owned
// object, its rollout's progress or a deletion, starts a pass for its
// owner), the objects WaitFor steps name ([Reconciler.ReferenceSources]),
// and re-queueing the objects whose passes failed while the API server was
// unavailable ([Reconciler.OutageRecovery]). A controller that
// needs more watches calls [Reconciler.Builder] instead.
func (r *Reconciler[T]) SetupWithManager(mgr manager.Manager) error {
	return r.Builder(mgr).Complete(r)
}

// Builder returns the controller builder SetupWithManager completes:
// Named(Options.Name), For(T), with Cleanup Watches(T,
// r.DeletedWithFinalizer()), Owns each of Options.Owns, and
// WatchesRawSource for each of r.ReferenceSources() and
// r.OutageRecovery(). Add watches (an object a spec names, a shared
// object) and options to it, then Complete(r).
func (r *Reconciler[T]) Builder(mgr manager.Manager) *builder.Builder {
	b := builder.ControllerManagedBy(mgr).Named(r.opts.Name).For(r.newObject())
	if len(r.opts.Cleanup) > 0 {
		b = b.Watches(r.newObject(), r.DeletedWithFinalizer())
	}
	for _, o := range r.opts.Owns {
		b = b.Owns(o)
	}
	for _, src := range r.ReferenceSources() {
		b = b.WatchesRawSource(src)
	}
	return b.WatchesRawSource(r.OutageRecovery())
}
