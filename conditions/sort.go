package conditions

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Sort puts conditions in the canonical order Set keeps them in (Ready,
// Reconciling, Stalled, then the rest by type), for code that merges
// condition lists by hand, such as a status write retried after a conflict.
func Sort(conds []metav1.Condition) {
	slices.SortStableFunc(conds, compare)
}
