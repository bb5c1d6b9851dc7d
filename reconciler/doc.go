// Package reconciler is a generic, typed, phased reconcile.Reconciler: a
// team's Reconcile becomes a list of steps and nothing else.
//
// The [Reconciler] does the rest once per pass: it fetches the object
// (honouring [PausedAnnotation]), ensures the finalizer before any step or
// runs the cleanup steps on deletion, runs the steps in order on a private
// copy, derives Ready, Reconciling, Stalled and status.observedGeneration,
// writes status at most once with an optimistic lock, and emits an event
// when Ready changes.
//
// The kinds the steps apply are declared in Options.Owns;
// [Reconciler.SetupWithManager] watches them and [Scope.ApplyAndWait]
// applies and judges one in a call.
//
// docs/reconciler.md describes the pass, its guarantees and their design
// (reading the pass's own writes, never acting behind an earlier pass,
// recovery after an API server outage). The subpackage reconcilertest is
// the test kit.
package reconciler
