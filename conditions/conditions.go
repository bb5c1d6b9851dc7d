package conditions

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Well-known condition types. Ready is "normal-true" (True is the good state);
// Reconciling and Stalled are kstatus' "abnormal-true" conditions (True is the
// state a tool should report), so a healthy object has Ready=True and either
// no Reconciling/Stalled or both False. See the package documentation for how
// kubectl, Flux and Argo CD read them.
const (
	// Ready is True when the object is fully reconciled and serving.
	// [ReadySummary.SetReady] computes it from the object's other conditions.
	Ready = "Ready"
	// Reconciling is True while the controller is working towards the
	// desired state (kstatus reports the object as InProgress).
	Reconciling = "Reconciling"
	// Stalled is True when progress is impossible without a change to the
	// object or its environment, e.g. an invalid spec (kstatus reports the
	// object as Failed).
	Stalled = "Stalled"
)

// Getter is anything that carries a generation and status conditions.
// GetGeneration comes from metav1.Object, so every API object pointer that
// exposes its []metav1.Condition via GetConditions satisfies it.
type Getter interface {
	GetGeneration() int64
	GetConditions() []metav1.Condition
}

// Setter is a [Getter] whose conditions can be replaced. Set, Mark*, Delete
// and [ReadySummary.SetReady] only ever call SetConditions with a fresh slice, never
// one that aliases the slice GetConditions returned, so a caller holding the
// old slice (for a diff or a patch base) keeps seeing the old values.
type Setter interface {
	Getter
	SetConditions([]metav1.Condition)
}

// Get returns a copy of the condition of the given type, or nil if the
// object has none. Modifying the result does not modify the object; use
// [Set] to write it back.
func Get(from Getter, conditionType string) *metav1.Condition {
	c := meta.FindStatusCondition(from.GetConditions(), conditionType)
	if c == nil {
		return nil
	}
	out := *c // metav1.Condition holds no pointers or slices: a shallow copy is a deep copy.
	return &out
}

// IsTrue reports whether the condition is present with status True.
func IsTrue(from Getter, conditionType string) bool {
	return meta.IsStatusConditionTrue(from.GetConditions(), conditionType)
}

// IsFalse reports whether the condition is present with status False.
func IsFalse(from Getter, conditionType string) bool {
	return meta.IsStatusConditionFalse(from.GetConditions(), conditionType)
}

// IsUnknown reports whether the condition is absent or has status Unknown:
// an absent condition carries no information, which is what Unknown means.
func IsUnknown(from Getter, conditionType string) bool {
	c := meta.FindStatusCondition(from.GetConditions(), conditionType)
	return c == nil || c.Status == metav1.ConditionUnknown
}

// Set validates c, stamps it and stores it on to, so that writing the
// object's status afterwards cannot be rejected by the apiserver because of
// this condition and does not churn between reconcile passes.
//
// Guarantees:
//   - ObservedGeneration is set to to.GetGeneration(), whatever c says.
//   - LastTransitionTime changes only when Status changes (a new reason or
//     message alone keeps it). A new condition, or a status flip, takes c's
//     LastTransitionTime if it is non-zero and otherwise the current time
//     truncated to whole seconds (what the apiserver stores, so a read-back
//     object compares equal).
//   - A message that is not valid UTF-8 has each invalid byte replaced by
//     U+FFFD, as JSON encoding would do on the way to the apiserver; a message
//     longer than 32768 bytes (the API limit) is then cut on a rune boundary
//     and ends in "…(truncated)". Neither is an error.
//   - Conditions are kept in a canonical order: Ready, Reconciling, Stalled,
//     then all other types sorted by byte-wise string comparison. Setting a
//     condition that is already present unchanged, on a list already in
//     that order, does not call SetConditions at all: the slice stays
//     identical and the call allocates nothing.
//   - If c is invalid (type not a qualified name or longer than 316
//     characters; status not True, False or Unknown; reason not accepted by
//     [ValidateReason]; negative generation) Set returns an error naming the
//     field and the object, and to is left unchanged.
//
// Caveats:
//   - When the status does not change, a LastTransitionTime in c is ignored.
//   - Existing conditions that are out of canonical order are reordered the
//     first time Set changes or reorders anything; this is one extra status
//     diff, after which the order is stable.
func Set(to Setter, c metav1.Condition) error {
	c.Message = normalizeMessage(c.Message)
	c.ObservedGeneration = to.GetGeneration()
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = now()
	}
	if err := validate(c); err != nil {
		return fmt.Errorf("conditions: setting condition %q on %s: %w", c.Type, describe(to), err)
	}

	current := to.GetConditions()
	if existing := meta.FindStatusCondition(current, c.Type); existing != nil &&
		existing.Status == c.Status &&
		existing.Reason == c.Reason &&
		existing.Message == c.Message &&
		existing.ObservedGeneration == c.ObservedGeneration &&
		slices.IsSortedFunc(current, compare) {
		return nil
	}

	next := make([]metav1.Condition, len(current), len(current)+1)
	copy(next, current)
	meta.SetStatusCondition(&next, c)
	slices.SortStableFunc(next, compare)
	to.SetConditions(next)
	return nil
}

// MarkTrue sets the condition to True with the given reason and a message
// formatted with fmt.Sprintf. See [Set] for the guarantees.
func MarkTrue(to Setter, conditionType, reason, messageFormat string, args ...any) error {
	return mark(to, conditionType, metav1.ConditionTrue, reason, messageFormat, args)
}

// MarkFalse sets the condition to False with the given reason and a message
// formatted with fmt.Sprintf. See [Set] for the guarantees.
func MarkFalse(to Setter, conditionType, reason, messageFormat string, args ...any) error {
	return mark(to, conditionType, metav1.ConditionFalse, reason, messageFormat, args)
}

// MarkUnknown sets the condition to Unknown with the given reason and a
// message formatted with fmt.Sprintf. See [Set] for the guarantees.
func MarkUnknown(to Setter, conditionType, reason, messageFormat string, args ...any) error {
	return mark(to, conditionType, metav1.ConditionUnknown, reason, messageFormat, args)
}

func mark(to Setter, conditionType string, status metav1.ConditionStatus, reason, messageFormat string, args []any) error {
	return Set(to, metav1.Condition{
		Type:    conditionType,
		Status:  status,
		Reason:  reason,
		Message: fmt.Sprintf(messageFormat, args...),
	})
}

// Delete removes the condition of the given type. Deleting an absent
// condition does nothing (SetConditions is not called). The order of the
// remaining conditions is preserved, and an emptied list becomes nil.
func Delete(to Setter, conditionType string) {
	current := to.GetConditions()
	if meta.FindStatusCondition(current, conditionType) == nil {
		return
	}
	next := current
	meta.RemoveStatusCondition(&next, conditionType) // allocates a new slice; current is untouched
	if len(next) == 0 {
		next = nil
	}
	to.SetConditions(next)
}

// now is the LastTransitionTime of new and flipped conditions: whole seconds,
// because metav1.Time serialises as RFC 3339 without fractions and a value
// with nanoseconds would never compare equal to the stored one.
func now() metav1.Time {
	return metav1.NewTime(time.Now().UTC().Truncate(time.Second))
}

// rank puts the kstatus conditions first, so `kubectl get -o yaml` and
// dashboards show the summary before the details.
func rank(conditionType string) int {
	switch conditionType {
	case Ready:
		return 0
	case Reconciling:
		return 1
	case Stalled:
		return 2
	default:
		return 3
	}
}

// compare is the canonical order: by rank, then by type.
func compare(a, b metav1.Condition) int {
	if ra, rb := rank(a.Type), rank(b.Type); ra != rb {
		return ra - rb
	}
	return strings.Compare(a.Type, b.Type)
}

// describe names the object in errors without requiring a full metav1.Object.
func describe(o Getter) string {
	named, ok := o.(interface {
		GetNamespace() string
		GetName() string
	})
	if !ok || named.GetName() == "" {
		return fmt.Sprintf("%T", o)
	}
	if ns := named.GetNamespace(); ns != "" {
		return fmt.Sprintf("%T %s/%s", o, ns, named.GetName())
	}
	return fmt.Sprintf("%T %s", o, named.GetName())
}
