// Package finalizer adds and removes finalizers without clobbering other
// writers.
//
// [Ensure] and [Remove] send only the finalizers list, locked to the
// object's resourceVersion, and re-read and retry on conflict, so neither a
// user's spec edit nor another controller's finalizer is lost, as they are
// with controllerutil.AddFinalizer and a whole-object Update, or an unlocked
// merge patch from a stale copy. Pass [WithAPIReader] (mgr.GetAPIReader())
// when the client reads from a cache: the re-read must see the apiserver.
// Ensure never adds a finalizer to an object that is being deleted.
//
// The reconciler package uses it for Options.Finalizer. In a hand-written
// reconciler: while the object has no deletionTimestamp, call [Ensure]
// before creating anything that needs cleanup; once it has one, clean up,
// idempotently, then call [Remove]. docs/finalizer.md has the details.
package finalizer
