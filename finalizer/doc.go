// Package finalizer adds and removes finalizers without clobbering other
// writers, and runs finalizer cleanup that cannot get stuck silently.
//
// # The problems it prevents
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
// the conflict: pass [APIReader] (and set [Finalizer].APIReader) to
// mgr.GetAPIReader() when the client is the manager's.
//
// Objects stuck in Terminating. A finalizer whose cleanup keeps failing holds
// the object — and its namespace — in Terminating forever, and the only
// trace is a line in the controller's log. [Finalizer] runs ordered,
// idempotent cleanup steps and reports every failure where users look: a
// Ready=False condition with reason CleanupFailed, a Warning event, and,
// after a configurable Deadline, a CleanupOverdue Warning on every pass
// saying how long the object has been stuck and which step holds it. Removing
// the finalizer anyway after the deadline is an explicit opt-in
// (RemoveAfterDeadline), never a default.
//
// Objects deleted too early. A finalizer added to an object that is already
// being deleted only blocks a deletion nobody prepared for; [Ensure] refuses
// to do so, even when its copy of the object is stale.
//
// # Use
//
// In Reconcile: if the object has no deletionTimestamp, call [Ensure] before
// creating anything that needs cleanup, e.g.
// finalizer.Ensure(ctx, mgr.GetClient(), obj, name, finalizer.APIReader(mgr.GetAPIReader()));
// otherwise call [Finalizer.Finalize] and stop once it reports done. Finalize sets conditions in memory only;
// write status afterwards as for any other pass.
package finalizer
