package conditions

import (
	"slices"
	"sort"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// FuzzSet checks Set against apimachinery's validation on arbitrary input.
// Seeds live in testdata/fuzz/FuzzSet; without -fuzz it runs them as a
// normal test. Run `go test -fuzz=FuzzSet ./conditions` to explore.
//
// Invariants: no panic; Set succeeds exactly when apimachinery accepts the
// stamped condition (and the type fits the 316-character schema limit); a
// failed Set leaves the object unchanged; after a successful Set every
// condition is valid, types are unique and in canonical order, the set
// condition carries the object's generation and a storable message, and
// setting it again changes nothing.
func FuzzSet(f *testing.F) {
	f.Add("Ready", "True", "Succeeded", "all good", int64(1), int64(0), false)
	f.Fuzz(func(t *testing.T, typ, status, reason, message string, generation, lttUnix int64, shuffled bool) {
		existing := []metav1.Condition{
			{Type: Ready, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.Unix(1, 0)},
			{Type: Stalled, Status: metav1.ConditionFalse, Reason: "AsExpected", LastTransitionTime: metav1.Unix(2, 0)},
			{Type: "Synced", Status: metav1.ConditionFalse, Reason: "Failed", Message: "m", LastTransitionTime: metav1.Unix(3, 0)},
			{Type: "example.com/Zed", Status: metav1.ConditionUnknown, Reason: "Pending", LastTransitionTime: metav1.Unix(4, 0)},
		}
		if shuffled {
			slices.Reverse(existing)
		}
		w := &testv1.Widget{}
		w.Generation = generation
		w.Status.Conditions = existing
		before := w.DeepCopy()

		in := metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: message}
		if lttUnix != 0 {
			in.LastTransitionTime = metav1.Unix(lttUnix, 0)
		}
		err := Set(w, in)

		// Agreement with apimachinery on the stamped condition.
		stamped := in
		stamped.Message = normalizeMessage(message)
		stamped.ObservedGeneration = generation
		stamped.LastTransitionTime = metav1.Unix(1, 0)
		apiErrs := metav1validation.ValidateCondition(stamped, field.NewPath("c"))
		wantOK := len(apiErrs) == 0 && len(typ) <= maxTypeLength
		if (err == nil) != wantOK {
			t.Fatalf("Set error = %v, but apimachinery says valid=%v (%v)", err, wantOK, apiErrs)
		}
		if fast, slow := validType(typ), len(content.IsLabelKey(typ)) == 0 && len(typ) <= maxTypeLength; fast != slow {
			t.Fatalf("validType(%q) = %v, IsLabelKey+length says %v", typ, fast, slow)
		}
		if (ValidateReason(reason) == nil) != validReason(reason) {
			t.Fatalf("ValidateReason(%q) disagrees with validReason", reason)
		}

		if err != nil {
			if !slices.Equal(before.Status.Conditions, w.Status.Conditions) {
				t.Fatalf("failed Set changed the object: %v", err)
			}
			return
		}

		got := w.Status.Conditions
		seen := map[string]bool{}
		for i, c := range got {
			if seen[c.Type] {
				t.Fatalf("duplicate type %q", c.Type)
			}
			seen[c.Type] = true
			if errs := metav1validation.ValidateCondition(c, field.NewPath("c").Index(i)); len(errs) > 0 {
				t.Fatalf("stored condition invalid: %v", errs)
			}
		}
		if want := canonicalOrder(got); !slices.Equal(typesOf(got), want) {
			t.Fatalf("order %q, want %q", typesOf(got), want)
		}
		c := Get(w, typ)
		if c == nil {
			t.Fatalf("condition %q not stored", typ)
		}
		if c.ObservedGeneration != generation {
			t.Fatalf("ObservedGeneration = %d, want %d", c.ObservedGeneration, generation)
		}
		if len(c.Message) > maxMessageLength || !utf8.ValidString(c.Message) {
			t.Fatalf("message not storable: %d bytes, valid UTF-8 %v", len(c.Message), utf8.ValidString(c.Message))
		}
		if c.Status != in.Status || c.Reason != in.Reason {
			t.Fatalf("stored %s/%s, want %s/%s", c.Status, c.Reason, in.Status, in.Reason)
		}

		snapshot := slices.Clone(got)
		if err := Set(w, in); err != nil {
			t.Fatalf("second Set: %v", err)
		}
		if !slices.Equal(snapshot, w.Status.Conditions) {
			t.Fatalf("second Set churned:\n%v\n%v", snapshot, w.Status.Conditions)
		}
	})
}

func typesOf(cs []metav1.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Type
	}
	return out
}

// canonicalOrder restates the documented order independently of compare.
func canonicalOrder(cs []metav1.Condition) []string {
	var head, rest []string
	present := map[string]bool{}
	for _, c := range cs {
		present[c.Type] = true
	}
	for _, t := range []string{Ready, Reconciling, Stalled} {
		if present[t] {
			head = append(head, t)
			delete(present, t)
		}
	}
	for t := range present {
		rest = append(rest, t)
	}
	sort.Strings(rest)
	return append(head, rest...)
}
