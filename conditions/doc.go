// Package conditions reads and writes status conditions on any object whose
// status holds []metav1.Condition, building on apimachinery's
// meta.SetStatusCondition and its condition validation.
//
// # The problem it prevents
//
// Hand-written condition code fails in three quiet ways:
//
//   - The apiserver validates conditions (reason pattern and length, type,
//     status, 32768-byte message). One bad reason built at run time, or an
//     error message pasted whole into a condition, makes the entire status
//     write fail, so the object shows stale status and nobody sees why.
//     [Set] validates with apimachinery's own rules before touching the
//     object, returns a descriptive error instead, and truncates over-long
//     messages (which are never worth failing for).
//   - Status that differs between passes although nothing happened (a
//     LastTransitionTime refreshed on every pass, conditions appended in
//     a different order) makes every reconcile write status, which emits a
//     watch event, which triggers another reconcile. Set moves
//     LastTransitionTime only when the status flips, keeps a canonical
//     order, and does not touch the object when nothing changed.
//   - Ready set by hand in many branches drifts from the detailed
//     conditions. A [ReadySummary] declares what Ready depends on and computes it.
//
// Every Set stamps ObservedGeneration with the object's generation, so
// readers can tell a condition about the current spec from a stale one.
//
// # Canonical order
//
// Ready, Reconciling, Stalled, then every other type sorted by byte-wise
// string comparison ("Available" < "Synced" < "example.com/Foo"). The order
// is a pure function of the set of types, so serialised status is identical
// between passes and between replicas of a controller.
//
// # kstatus, kubectl, Flux and Argo CD
//
// Ready is a "normal-true" condition: True is the healthy state. Reconciling
// and Stalled follow kstatus (sigs.k8s.io/cli-utils/pkg/kstatus), where they
// are "abnormal-true": they are True only while something noteworthy holds and
// are otherwise False or absent. Set Reconciling=True while work is in
// progress and Stalled=True when progress needs a change from a human (bad
// spec, missing permission); Ready is then normally False or Unknown. Never
// list them as ReadySummary dependents: their polarity is the opposite of Ready's.
//
// How the common tools read them:
//
//   - kubectl wait --for=condition=Ready finds the condition whose type
//     matches case-insensitively and compares its status to True; it treats
//     the condition as not met while its observedGeneration is below
//     metadata.generation. Because Set stamps ObservedGeneration, a Ready=True
//     left over from the previous spec does not end the wait early.
//   - kstatus, used by Flux (Kustomization spec.wait / spec.healthChecks),
//     kpt and cli-utils appliers, computes: deletionTimestamp set →
//     Terminating; status.observedGeneration (the top-level field, which
//     this package does not manage) differs from metadata.generation →
//     InProgress; Reconciling=True → InProgress; Stalled=True → Failed;
//     otherwise Current. Its generic rules do not read Ready, which is why a
//     kstatus-compatible controller must also maintain Reconciling/Stalled
//     (or the tool must be given an expression that reads Ready, e.g. Flux's
//     spec.healthCheckExprs).
//   - Argo CD reports a custom resource without a health check as Healthy as
//     soon as it exists. Give it a Lua health check (resource.customizations
//     in argocd-cm) that maps Stalled=True, or Ready=False without
//     Reconciling=True, to Degraded; Reconciling=True, or Ready Unknown,
//     absent or of an older generation, to Progressing; and Ready=True of
//     the current generation to Healthy.
//
// # Validation
//
// Conditions are checked against apimachinery's ValidateCondition: type a
// qualified name ("Ready", "example.com/Ready") of at most 316 characters,
// status True/False/Unknown, reason non-empty, at most 1024 bytes, matching
// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ (CamelCase recommended), message
// at most 32768 bytes. The same rules are in the CRD schema controller-gen
// generates for metav1.Condition, so what Set accepts the apiserver accepts.
package conditions
