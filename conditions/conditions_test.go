package conditions_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// counting is a Setter that records SetConditions calls, to prove no-op
// paths leave the object alone.
type counting struct {
	generation int64
	conds      []metav1.Condition
	sets       int
}

func (c *counting) GetGeneration() int64                { return c.generation }
func (c *counting) GetConditions() []metav1.Condition   { return c.conds }
func (c *counting) SetConditions(cs []metav1.Condition) { c.sets++; c.conds = cs }

func widget(generation int64, conds ...metav1.Condition) *testv1.Widget {
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", Generation: generation}}
	w.Status.Conditions = conds
	return w
}

var t0 = metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))

func cond(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: t0, ObservedGeneration: 1}
}

func types(cs []metav1.Condition) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Type)
	}
	return out
}

func TestGetReturnsCopy(t *testing.T) {
	w := widget(1, cond("Synced", metav1.ConditionTrue, "Applied", "ok"))

	assert.Nil(t, conditions.Get(w, "Missing"))

	got := conditions.Get(w, "Synced")
	require.NotNil(t, got)
	assert.Equal(t, w.Status.Conditions[0], *got)
	got.Reason = "Changed"
	assert.Equal(t, "Applied", w.Status.Conditions[0].Reason, "mutating Get's result must not mutate the object")
}

func TestStatusPredicates(t *testing.T) {
	w := widget(1,
		cond("T", metav1.ConditionTrue, "R", ""),
		cond("F", metav1.ConditionFalse, "R", ""),
		cond("U", metav1.ConditionUnknown, "R", ""),
	)
	tests := []struct {
		typ                      string
		isTrue, isFalse, unknown bool
	}{
		{typ: "T", isTrue: true},
		{typ: "F", isFalse: true},
		{typ: "U", unknown: true},
		{typ: "Absent", unknown: true},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			assert.Equal(t, tt.isTrue, conditions.IsTrue(w, tt.typ), "IsTrue")
			assert.Equal(t, tt.isFalse, conditions.IsFalse(w, tt.typ), "IsFalse")
			assert.Equal(t, tt.unknown, conditions.IsUnknown(w, tt.typ), "IsUnknown")
		})
	}
}

func TestMarkSetsStatusReasonFormattedMessageAndGeneration(t *testing.T) {
	tests := []struct {
		name string
		mark func(conditions.Setter, string, string, string, ...any) error
		want metav1.ConditionStatus
	}{
		{"MarkTrue", conditions.MarkTrue, metav1.ConditionTrue},
		{"MarkFalse", conditions.MarkFalse, metav1.ConditionFalse},
		{"MarkUnknown", conditions.MarkUnknown, metav1.ConditionUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widget(7)
			require.NoError(t, tt.mark(w, "Synced", "SomeReason", "%d of %s", 3, "five"))
			got := conditions.Get(w, "Synced")
			require.NotNil(t, got)
			assert.Equal(t, tt.want, got.Status)
			assert.Equal(t, "SomeReason", got.Reason)
			assert.Equal(t, "3 of five", got.Message)
			assert.Equal(t, int64(7), got.ObservedGeneration)
		})
	}
}

func TestSetStampsObservedGenerationIgnoringCaller(t *testing.T) {
	w := widget(4, cond("Synced", metav1.ConditionTrue, "Applied", ""))
	c := cond("Synced", metav1.ConditionTrue, "Applied", "")
	c.ObservedGeneration = 99
	require.NoError(t, conditions.Set(w, c))
	assert.Equal(t, int64(4), conditions.Get(w, "Synced").ObservedGeneration)
}

func TestSetLastTransitionTime(t *testing.T) {
	later := metav1.NewTime(t0.Add(time.Hour))
	tests := []struct {
		name     string
		existing []metav1.Condition
		set      metav1.Condition
		// wantNow: LTT must be the (whole-second) current time; otherwise want.
		wantNow bool
		want    metav1.Time
	}{
		{
			name:    "new condition without LTT gets now",
			set:     metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R"},
			wantNow: true,
		},
		{
			name: "new condition keeps caller LTT",
			set:  metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: later},
			want: later,
		},
		{
			name:     "reason change alone keeps LTT",
			existing: []metav1.Condition{cond("A", metav1.ConditionTrue, "R", "m")},
			set:      metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "Other", Message: "m"},
			want:     t0,
		},
		{
			name:     "message change alone keeps LTT",
			existing: []metav1.Condition{cond("A", metav1.ConditionFalse, "R", "m")},
			set:      metav1.Condition{Type: "A", Status: metav1.ConditionFalse, Reason: "R", Message: "other"},
			want:     t0,
		},
		{
			name:     "caller LTT without a flip is ignored",
			existing: []metav1.Condition{cond("A", metav1.ConditionTrue, "R", "m")},
			set:      metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R2", LastTransitionTime: later},
			want:     t0,
		},
		{
			name:     "flip without LTT gets now",
			existing: []metav1.Condition{cond("A", metav1.ConditionTrue, "R", "m")},
			set:      metav1.Condition{Type: "A", Status: metav1.ConditionFalse, Reason: "R"},
			wantNow:  true,
		},
		{
			name:     "flip keeps caller LTT",
			existing: []metav1.Condition{cond("A", metav1.ConditionUnknown, "R", "m")},
			set:      metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: later},
			want:     later,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widget(1, tt.existing...)
			before := time.Now().Truncate(time.Second)
			require.NoError(t, conditions.Set(w, tt.set))
			after := time.Now()
			got := conditions.Get(w, "A").LastTransitionTime
			if !tt.wantNow {
				assert.True(t, tt.want.Equal(&got), "LastTransitionTime = %v, want %v", got, tt.want)
				return
			}
			assert.False(t, got.Time.Before(before), "LastTransitionTime %v before the call (%v)", got, before)
			assert.False(t, got.After(after), "LastTransitionTime %v after the call (%v)", got, after)
			assert.Zero(t, got.Nanosecond(), "LastTransitionTime must be whole seconds, like the stored value")
		})
	}
}

func TestSetKeepsCanonicalOrder(t *testing.T) {
	tests := []struct {
		name     string
		existing []metav1.Condition
		set      []string
		want     []string
	}{
		{
			name: "insertion order does not matter",
			set:  []string{"example.com/Zed", "Synced", "Stalled", "Available", "Ready", "Reconciling"},
			want: []string{"Ready", "Reconciling", "Stalled", "Available", "Synced", "example.com/Zed"},
		},
		{
			name: "same set in another order gives the same result",
			set:  []string{"Reconciling", "Available", "example.com/Zed", "Ready", "Synced", "Stalled"},
			want: []string{"Ready", "Reconciling", "Stalled", "Available", "Synced", "example.com/Zed"},
		},
		{
			name: "out-of-order existing conditions are put in order",
			existing: []metav1.Condition{
				cond("Synced", metav1.ConditionTrue, "R", ""),
				cond("Ready", metav1.ConditionTrue, "R", ""),
				cond("Available", metav1.ConditionTrue, "R", ""),
			},
			set:  []string{"Stalled"},
			want: []string{"Ready", "Stalled", "Available", "Synced"},
		},
		{
			name: "an unchanged condition still reorders an out-of-order list",
			existing: []metav1.Condition{
				cond("Synced", metav1.ConditionTrue, "R", ""),
				cond("Ready", metav1.ConditionTrue, "R", ""),
			},
			set:  []string{"Ready"},
			want: []string{"Ready", "Synced"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widget(1, tt.existing...)
			for _, typ := range tt.set {
				require.NoError(t, conditions.MarkTrue(w, typ, "R", ""))
			}
			assert.Equal(t, tt.want, types(w.Status.Conditions))
		})
	}
}

func TestSetSameConditionTwiceDoesNotChurn(t *testing.T) {
	o := &counting{generation: 3}
	require.NoError(t, conditions.MarkFalse(o, "Synced", "Failed", "boom %d", 1))
	require.NoError(t, conditions.MarkTrue(o, "Available", "Up", ""))
	require.NoError(t, conditions.MarkUnknown(o, conditions.Ready, "Pending", ""))
	snapshot := append([]metav1.Condition(nil), o.conds...)
	sets := o.sets

	// Same values again, including a caller LTT that must be ignored.
	require.NoError(t, conditions.MarkFalse(o, "Synced", "Failed", "boom %d", 1))
	require.NoError(t, conditions.Set(o, metav1.Condition{
		Type: "Available", Status: metav1.ConditionTrue, Reason: "Up", LastTransitionTime: metav1.NewTime(time.Unix(1, 0)),
	}))
	require.NoError(t, conditions.MarkUnknown(o, conditions.Ready, "Pending", ""))

	assert.Equal(t, snapshot, o.conds)
	assert.Equal(t, sets, o.sets, "no-op Sets must not call SetConditions")
}

func TestSetGenerationBumpRestamps(t *testing.T) {
	w := widget(1)
	require.NoError(t, conditions.MarkTrue(w, "Synced", "Applied", ""))
	ltt := conditions.Get(w, "Synced").LastTransitionTime
	w.Generation = 2
	require.NoError(t, conditions.MarkTrue(w, "Synced", "Applied", ""))
	got := conditions.Get(w, "Synced")
	assert.Equal(t, int64(2), got.ObservedGeneration)
	assert.Equal(t, ltt, got.LastTransitionTime, "a new generation is not a transition")
}

func TestSetDoesNotWriteThroughTheOldSlice(t *testing.T) {
	w := widget(1, cond("Synced", metav1.ConditionTrue, "Applied", "old"))
	old := w.Status.Conditions
	require.NoError(t, conditions.MarkFalse(w, "Synced", "Failed", "new"))
	assert.Equal(t, "old", old[0].Message)
	assert.Equal(t, metav1.ConditionTrue, old[0].Status)
	assert.Equal(t, "new", w.Status.Conditions[0].Message)
}

func TestSetRejectsInvalidConditionAndLeavesObjectUnchanged(t *testing.T) {
	prefix253 := strings.Repeat("a", 61) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63)
	require.Len(t, prefix253, 253)
	tests := []struct {
		name       string
		generation int64
		c          metav1.Condition
		wantField  string
	}{
		{"empty reason", 1, metav1.Condition{Type: "A", Status: metav1.ConditionTrue}, "reason"},
		{"reason with space", 1, metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "Not valid"}, "reason"},
		{"reason starting with digit", 1, metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "1Reason"}, "reason"},
		{"reason ending with comma", 1, metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "A,"}, "reason"},
		{"reason with dash", 1, metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "Some-Reason"}, "reason"},
		{"reason 1025 bytes", 1, metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: strings.Repeat("R", 1025)}, "reason"},
		{"empty type", 1, metav1.Condition{Status: metav1.ConditionTrue, Reason: "R"}, "type"},
		{"type with space", 1, metav1.Condition{Type: "My Type", Status: metav1.ConditionTrue, Reason: "R"}, "type"},
		{"type with two slashes", 1, metav1.Condition{Type: "a.io/b/C", Status: metav1.ConditionTrue, Reason: "R"}, "type"},
		{"type with upper-case prefix", 1, metav1.Condition{Type: "Example.com/C", Status: metav1.ConditionTrue, Reason: "R"}, "type"},
		{"type name 64 chars", 1, metav1.Condition{Type: strings.Repeat("T", 64), Status: metav1.ConditionTrue, Reason: "R"}, "type"},
		// A qualified name may be 317 characters; the schema allows 316.
		{"type 317 chars", 1, metav1.Condition{Type: prefix253 + "/" + strings.Repeat("N", 63), Status: metav1.ConditionTrue, Reason: "R"}, "type"},
		{"empty status", 1, metav1.Condition{Type: "A", Reason: "R"}, "status"},
		{"lower-case status", 1, metav1.Condition{Type: "A", Status: "true", Reason: "R"}, "status"},
		{"negative generation", -1, metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R"}, "observedGeneration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widget(tt.generation, cond("Existing", metav1.ConditionTrue, "R", "m"), cond("A", metav1.ConditionFalse, "Old", "m"))
			before := w.DeepCopy()

			err := conditions.Set(w, tt.c)

			require.Error(t, err)
			assert.Contains(t, err.Error(), "status.conditions["+tt.c.Type+"]."+tt.wantField)
			assert.Contains(t, err.Error(), "ns/w", "the error names the object")
			assert.Equal(t, before, w, "an invalid condition must leave the object unchanged")
		})
	}
}

func TestSetAcceptsOddButValidValues(t *testing.T) {
	prefix252 := strings.Repeat("a", 60) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63)
	require.Len(t, prefix252, 252)
	tests := []struct {
		name string
		c    metav1.Condition
	}{
		{"one-letter reason", metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "a"}},
		{"reason with _ , :", metav1.Condition{Type: "A", Status: metav1.ConditionFalse, Reason: "Odd_but:valid,Reason_"}},
		{"reason 1024 bytes", metav1.Condition{Type: "A", Status: metav1.ConditionUnknown, Reason: strings.Repeat("R", 1024)}},
		{"prefixed type", metav1.Condition{Type: "example.com/Some-Type.v2_x", Status: metav1.ConditionTrue, Reason: "R"}},
		{"type 316 chars", metav1.Condition{Type: prefix252 + "/" + strings.Repeat("N", 63), Status: metav1.ConditionTrue, Reason: "R"}},
		{"message exactly 32768 bytes", metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R", Message: strings.Repeat("m", 32768)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widget(1)
			require.NoError(t, conditions.Set(w, tt.c))
			got := conditions.Get(w, tt.c.Type)
			require.NotNil(t, got)
			assert.Equal(t, tt.c.Reason, got.Reason)
			assert.Equal(t, tt.c.Message, got.Message, "messages within the limit are stored verbatim")
		})
	}
}

func TestSetTruncatesLongMessages(t *testing.T) {
	const limit, marker = 32768, "…(truncated)"
	tests := []struct {
		name    string
		message string
	}{
		{"one byte over", strings.Repeat("m", limit+1)},
		{"far over", strings.Repeat("m", 10*limit)},
		{"two-byte runes", strings.Repeat("é", limit)},
		{"four-byte runes", strings.Repeat("😀", limit/2)},
		{"mixed widths", strings.Repeat("a€😀é", limit/4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widget(1)
			require.NoError(t, conditions.MarkFalse(w, "A", "R", "%s", tt.message))
			got := conditions.Get(w, "A").Message
			assert.LessOrEqual(t, len(got), limit)
			assert.Greater(t, len(got), limit-len(marker)-utf8.UTFMax, "truncation keeps as much as fits")
			assert.True(t, utf8.ValidString(got), "truncation must not split a rune")
			assert.True(t, strings.HasSuffix(got, marker))
			assert.True(t, strings.HasPrefix(tt.message, strings.TrimSuffix(got, marker)), "the kept part is a prefix of the original")
		})
	}
}

func TestSetReplacesInvalidUTF8LikeJSON(t *testing.T) {
	w := widget(1)
	require.NoError(t, conditions.MarkFalse(w, "A", "R", "bad\xff\xfebytes\xe2\x82"))
	// One U+FFFD per invalid byte, as encoding/json writes it.
	assert.Equal(t, "bad\uFFFD\uFFFDbytes\uFFFD\uFFFD", conditions.Get(w, "A").Message)
}

func TestDelete(t *testing.T) {
	t.Run("removes and keeps order", func(t *testing.T) {
		o := &counting{conds: []metav1.Condition{
			cond("Ready", metav1.ConditionTrue, "R", ""),
			cond("A", metav1.ConditionTrue, "R", ""),
			cond("B", metav1.ConditionTrue, "R", ""),
		}}
		old := o.conds
		conditions.Delete(o, "A")
		assert.Equal(t, []string{"Ready", "B"}, types(o.conds))
		assert.Equal(t, []string{"Ready", "A", "B"}, types(old), "the old slice is not modified")
	})
	t.Run("absent is a no-op", func(t *testing.T) {
		o := &counting{conds: []metav1.Condition{cond("A", metav1.ConditionTrue, "R", "")}}
		conditions.Delete(o, "Missing")
		assert.Zero(t, o.sets)
	})
	t.Run("last one leaves nil", func(t *testing.T) {
		o := &counting{conds: []metav1.Condition{cond("A", metav1.ConditionTrue, "R", "")}}
		conditions.Delete(o, "A")
		assert.Nil(t, o.conds)
		assert.Equal(t, 1, o.sets)
	})
}

func TestValidateReason(t *testing.T) {
	tests := []struct {
		reason string
		valid  bool
	}{
		{"Succeeded", true},
		{"a", true},
		{"A_", true},
		{"ReasonA,ReasonB", true},
		{"ReasonA:ReasonB", true},
		{"my_name9", true},
		{strings.Repeat("x", 1024), true},
		{"", false},
		{"_Leading", false},
		{"9Leading", false},
		{"Trailing:", false},
		{"Trailing,", false},
		{"Has-Dash", false},
		{"Has.Dot", false},
		{"Has Space", false},
		{"Ünïcode", false},
		{strings.Repeat("x", 1025), false},
	}
	for _, tt := range tests {
		name := tt.reason
		if len(name) > 20 {
			name = name[:20] + "…"
		}
		t.Run(name, func(t *testing.T) {
			err := conditions.ValidateReason(tt.reason)
			if tt.valid {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "reason")
		})
	}
}

func TestSortMatchesSetOrder(t *testing.T) {
	conds := []metav1.Condition{
		cond("example.com/Zed", metav1.ConditionTrue, "R", ""),
		cond("Synced", metav1.ConditionTrue, "R", ""),
		cond(conditions.Stalled, metav1.ConditionFalse, "R", ""),
		cond("Available", metav1.ConditionTrue, "R", ""),
		cond(conditions.Ready, metav1.ConditionTrue, "R", ""),
		cond(conditions.Reconciling, metav1.ConditionFalse, "R", ""),
	}
	conditions.Sort(conds)
	assert.Equal(t, []string{"Ready", "Reconciling", "Stalled", "Available", "Synced", "example.com/Zed"}, types(conds))

	// A Set on the sorted list must find nothing to reorder.
	o := &counting{generation: 1, conds: conds}
	require.NoError(t, conditions.MarkTrue(o, "Synced", "R", ""))
	assert.Zero(t, o.sets)
}
