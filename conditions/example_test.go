package conditions_test

import (
	"errors"
	"fmt"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// Declare once what Ready depends on, mark the details in each pass, and
// derive Ready last.
func Example() {
	readiness := conditions.NewReadySummary("Synced", "Available")

	w := &testv1.Widget{}
	w.Generation = 3
	err := errors.Join(
		conditions.MarkTrue(w, "Synced", "Applied", "applied %d objects", 4),
		conditions.MarkFalse(w, "Available", "ReplicasUnavailable", "%d/%d replicas ready", 1, 3),
		readiness.SetReady(w),
	)
	fmt.Println("error:", err)
	for _, c := range w.Status.Conditions {
		fmt.Printf("%s=%s %s (gen %d): %s\n", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
	}
	// Output:
	// error: <nil>
	// Ready=False ReplicasUnavailable (gen 3): 1/3 replicas ready
	// Available=False ReplicasUnavailable (gen 3): 1/3 replicas ready
	// Synced=True Applied (gen 3): applied 4 objects
}
