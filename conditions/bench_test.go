package conditions_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconcilekit/reconcilekit/conditions"
)

// BenchmarkSetNoChange measures the steady state of a reconciler: the
// condition it sets is already there. The goal is 0 allocs/op.
func BenchmarkSetNoChange(b *testing.B) {
	w := widget(2)
	c := metav1.Condition{Type: "example.com/Synced", Status: metav1.ConditionTrue, Reason: "Applied", Message: "applied 4 objects"}
	for _, typ := range []string{conditions.Ready, "Available", "Synced"} {
		if err := conditions.MarkTrue(w, typ, "R", "m"); err != nil {
			b.Fatal(err)
		}
	}
	if err := conditions.Set(w, c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := conditions.Set(w, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSummaryApply measures deriving Ready from three True dependents
// when Ready is already up to date.
func BenchmarkSummaryApply(b *testing.B) {
	s := conditions.NewReadySummary("Synced", "Available", "example.com/Backed-Up")
	w := widget(2)
	for _, typ := range s.Dependents() {
		if err := conditions.MarkTrue(w, typ, "R", "m"); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.SetReady(w); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.SetReady(w); err != nil {
			b.Fatal(err)
		}
	}
}
