// Package conditions reads and writes status conditions on any object whose
// status holds []metav1.Condition, building on apimachinery's
// meta.SetStatusCondition and its condition validation.
//
// [Set] validates a condition with the apiserver's own rules before touching
// the object (so one bad reason cannot make the whole status write fail),
// truncates over-long messages, stamps ObservedGeneration, moves
// LastTransitionTime only when the status flips, keeps the conditions in a
// canonical order (Ready, Reconciling, Stalled, then the other types sorted
// byte-wise) and leaves the object untouched when nothing changed, so a
// converged pass writes no status. A [ReadySummary] declares what Ready
// depends on and computes it.
//
// Ready is "normal-true" (True is healthy); Reconciling and Stalled follow
// kstatus (sigs.k8s.io/cli-utils/pkg/kstatus) and are "abnormal-true", so
// they are never Ready's dependents. docs/conditions.md has how kubectl
// wait, kstatus (Flux, kpt) and Argo CD read them, and the validation rules.
package conditions
