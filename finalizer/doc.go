// Package finalizer adds and removes finalizers without clobbering other
// writers.
//
// # The problem it prevents
//
// Lost writes. The common idioms write more than the finalizer.
// controllerutil.AddFinalizer followed by client.Update sends the whole
// object: from a stale (cached) copy it fails with a conflict, and a caller
// that forces the write reverts whatever changed meanwhile — a user's spec
// edit, or a finalizer another controller added, whose cleanup then never
// runs. A merge patch without a lock is subtler: JSON merge patch replaces
// lists wholesale, so patching finalizers from a stale copy silently drops the
// other controller's finalizer. [Ensure] and [Remove] send only the
// finalizers list, locked to obj's resourceVersion, and re-read and retry on
// conflict, so nothing another writer did is lost. The re-read must see the
// apiserver, not a cache that has not caught up with the write that caused
// the conflict: pass [WithAPIReader] with mgr.GetAPIReader() when the client is
// the manager's.
//
// Objects deleted too early. A finalizer added to an object that is already
// being deleted only blocks a deletion nobody prepared for; [Ensure] refuses
// to do so, even when its copy of the object is stale.
//
// # Use
//
// The reconciler package uses it for Options.Finalizer and runs the cleanup
// steps itself, reporting a cleanup that fails or takes too long (Ready,
// Warning events, a deadline) so that no object is stuck in Terminating
// silently. In a hand-written reconciler: if the object has no
// deletionTimestamp, call [Ensure] before creating anything that needs
// cleanup, e.g.
// finalizer.Ensure(ctx, mgr.GetClient(), obj, name, finalizer.WithAPIReader(mgr.GetAPIReader()));
// otherwise clean up, idempotently, and then call [Remove].
package finalizer
