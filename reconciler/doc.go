// Package reconciler is a generic, typed, phased reconcile.Reconciler: a
// team's Reconcile becomes a list of steps and nothing else.
//
// Hand-written reconcilers get the same things wrong in every operator:
// status written on every pass (or lost when a later step fails), Ready set
// by hand in a dozen branches and drifting from the details, a bad spec
// retried in a hot loop, a finalizer added after the owned objects it guards,
// a panic that kills the manager. The Reconciler does those parts once:
//
//   - fetch the object (gone: done); honour the PausedAnnotation;
//   - on deletion run the cleanup steps (the same Step type, with the same
//     Scope) and then remove the finalizer, otherwise ensure the finalizer
//     before any step (both by locked patch, package finalizer);
//   - run the steps in order on a private deep copy; each step returns an
//     [Outcome] (Continue, Wait, Terminal, Error, with After for requeues)
//     and may own a condition;
//   - derive Ready (from the step conditions, via conditions.ReadySummary),
//     Reconciling and Stalled (kstatus) and status.observedGeneration;
//   - write status once per pass, only if it changed, with an optimistic
//     lock and a conflict retry that re-applies this pass's delta;
//   - emit an Event when Ready changes (never on a converged pass; while
//     deleting, the cleanup events instead), log
//     with the step name, turn a panic into a condition, and export
//     per-step duration and error metrics and a histogram of mutating
//     requests per reconcile.
//
// Everything about watching stays controller-runtime's: register the
// Reconciler with ctrl.NewControllerManagedBy(mgr).For(...).Owns(...) as
// usual. Owned objects are applied through [Scope.Apply] (package
// ownership), which writes nothing when nothing changed, and judged with
// [Scope.Rollout] (kstatus), which is Current only once the generation the
// pass applied is rolled out. Within a pass, reads through [Scope] return
// the pass's own writes when the informer cache is older, so a step never
// reports Ready on a copy older than what an earlier step wrote. Across
// passes, a pass whose cached copy is older than one an earlier pass
// already saw reads the object from the API server instead, so it never
// redoes, from a stale live copy, what the cleanup of an object already
// gone undid.
//
// The subpackage reconcilertest holds the test kit: a request-counting,
// fault-injecting client with a cache-lag fault, and AssertIdempotent.
package reconciler
