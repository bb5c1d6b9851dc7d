package bench

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkMetaSetStatusConditionNoChange is the baseline's counterpart of
// conditions.BenchmarkSetNoChange: apimachinery's meta.SetStatusCondition,
// which tutorial-style operators call, on the same four conditions with
// the condition already present.
func BenchmarkMetaSetStatusConditionNoChange(b *testing.B) {
	var conds []metav1.Condition
	for _, typ := range []string{"Ready", "Available", "Synced"} {
		meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "R", Message: "m", ObservedGeneration: 2})
	}
	c := metav1.Condition{Type: "example.com/Synced", Status: metav1.ConditionTrue, Reason: "Applied", Message: "applied 4 objects", ObservedGeneration: 2}
	meta.SetStatusCondition(&conds, c)
	b.ReportAllocs()
	for b.Loop() {
		if meta.SetStatusCondition(&conds, c) {
			b.Fatal("unexpected change")
		}
	}
}
