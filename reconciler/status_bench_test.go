package reconciler

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// BenchmarkStatusChangedNoChange measures the comparison every pass makes
// before writing status, on the steady state: nothing changed, so the
// pass writes nothing. It is the price of the write it saves (make bench
// prints both).
func BenchmarkStatusChangedNoChange(b *testing.B) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	orig := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", Generation: 7}}
	orig.Status.ObservedGeneration = 7
	orig.Status.Note = "3/3 replicas ready"
	for _, typ := range []string{"Ready", "Reconciling", "Stalled", "DatabaseReady", "Available"} {
		orig.Status.Conditions = append(orig.Status.Conditions, metav1.Condition{
			Type: typ, Status: metav1.ConditionTrue, ObservedGeneration: 7, LastTransitionTime: at,
			Reason: "Succeeded", Message: "everything is fine with " + typ,
		})
	}
	obj := orig.DeepCopy()
	if statusChanged(orig, obj) {
		b.Fatal("a deep copy reads as changed")
	}
	b.ReportAllocs()
	for b.Loop() {
		if statusChanged(orig, obj) {
			b.Fatal("unexpected change")
		}
	}
}
