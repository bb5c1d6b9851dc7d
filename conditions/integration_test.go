package conditions_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

// TestAPIServerAgreesWithValidation proves the point of validation and
// truncation against a real kube-apiserver: whatever Set produces is
// accepted and reads back unchanged, and what Set rejects the apiserver
// would have rejected too.
func TestAPIServerAgreesWithValidation(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	c := env.Client
	ns := env.Namespace(t)
	prefix252 := strings.Repeat("a", 60) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63)

	t.Run("status built with Set is accepted and round-trips", func(t *testing.T) {
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "accepted", Namespace: ns}, Spec: testv1.WidgetSpec{Size: 1}}
		require.NoError(t, c.Create(ctx, w))

		// 40001 bytes: an invalid byte (which JSON turns into U+FFFD), then
		// multi-byte runes well over the limit.
		long := "\xff" + strings.Repeat("é", 20000)
		require.NoError(t, conditions.MarkFalse(w, "Synced", "Odd_but:valid,Reason_", "%s", long))
		require.NoError(t, conditions.MarkTrue(w, prefix252+"/"+strings.Repeat("N", 63), strings.Repeat("R", 1024), "longest type"))
		require.NoError(t, conditions.MarkUnknown(w, "example.com/Backed-Up.v2", "a", ""))
		require.NoError(t, conditions.MarkTrue(w, conditions.Reconciling, "Progressing", ""))
		require.NoError(t, conditions.NewReadySummary("Synced").SetReady(w))
		require.Greater(t, len(long), 32768)

		sent := w.DeepCopy()
		require.NoError(t, c.Status().Update(ctx, w), "the apiserver must accept what Set produced")

		var got testv1.Widget
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), &got))
		requireSemanticallyEqual(t, sent.Status.Conditions, got.Status.Conditions)

		// Re-applying the same conditions to the read-back object is a no-op,
		// so the next reconcile pass would not write status again.
		readBack := got.DeepCopy()
		require.NoError(t, conditions.MarkFalse(&got, "Synced", "Odd_but:valid,Reason_", "%s", long))
		require.NoError(t, conditions.MarkTrue(&got, conditions.Reconciling, "Progressing", ""))
		require.NoError(t, conditions.NewReadySummary("Synced").SetReady(&got))
		assert.Equal(t, readBack.Status.Conditions, got.Status.Conditions)
	})

	t.Run("what validation rejects the apiserver rejects", func(t *testing.T) {
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}}
		require.NoError(t, c.Create(ctx, w))

		ok := metav1.Condition{Type: "Probe", Status: metav1.ConditionTrue, Reason: "Valid"}
		with := func(mutate func(*metav1.Condition)) metav1.Condition { c := ok; mutate(&c); return c }
		tests := []struct {
			name   string
			c      metav1.Condition
			accept bool
		}{
			{"plain", ok, true},
			{"odd reason", with(func(c *metav1.Condition) { c.Reason = "A_b:C,d_9" }), true},
			{"one-letter reason", with(func(c *metav1.Condition) { c.Reason = "x" }), true},
			{"1024-byte reason", with(func(c *metav1.Condition) { c.Reason = strings.Repeat("R", 1024) }), true},
			{"prefixed type", with(func(c *metav1.Condition) { c.Type = "example.com/Backed-Up.v2" }), true},
			{"316-char type", with(func(c *metav1.Condition) { c.Type = prefix252 + "/" + strings.Repeat("N", 63) }), true},
			{"empty reason", with(func(c *metav1.Condition) { c.Reason = "" }), false},
			{"reason with space", with(func(c *metav1.Condition) { c.Reason = "Not valid" }), false},
			{"reason with dash", with(func(c *metav1.Condition) { c.Reason = "Not-Valid" }), false},
			{"reason starting with digit", with(func(c *metav1.Condition) { c.Reason = "9Lives" }), false},
			{"reason ending with colon", with(func(c *metav1.Condition) { c.Reason = "Reason:" }), false},
			{"1025-byte reason", with(func(c *metav1.Condition) { c.Reason = strings.Repeat("R", 1025) }), false},
			{"type with space", with(func(c *metav1.Condition) { c.Type = "My Type" }), false},
			{"317-char type", with(func(c *metav1.Condition) { c.Type = "a" + prefix252 + "/" + strings.Repeat("N", 63) }), false},
			{"lower-case status", with(func(c *metav1.Condition) { c.Status = "true" }), false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				// Our side: Set on an in-memory object, and ValidateReason.
				setErr := conditions.Set(&testv1.Widget{}, tt.c)
				assert.Equal(t, tt.accept, setErr == nil, "Set error: %v", setErr)
				if tt.c.Type == ok.Type && tt.c.Status == ok.Status {
					reasonErr := conditions.ValidateReason(tt.c.Reason)
					assert.Equal(t, tt.accept, reasonErr == nil, "ValidateReason error: %v", reasonErr)
				}

				// Server side: write the condition directly, bypassing Set.
				err := writeConditionDirectly(t, w, tt.c)
				if tt.accept {
					require.NoError(t, err)
					return
				}
				require.Error(t, err, "the apiserver accepted a condition Set rejects")
				assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			})
		}

		t.Run("over-long message: rejected when written directly, truncated by Set", func(t *testing.T) {
			long := with(func(c *metav1.Condition) { c.Message = strings.Repeat("m", 32769) })
			err := writeConditionDirectly(t, w, long)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)

			var fresh testv1.Widget
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), &fresh))
			require.NoError(t, conditions.Set(&fresh, long))
			require.NoError(t, c.Status().Update(ctx, &fresh))
		})
	})
}

// writeConditionDirectly replaces w's stored conditions with c, bypassing
// Set, and returns the apiserver's answer.
func writeConditionDirectly(t *testing.T, w *testv1.Widget, c metav1.Condition) error {
	t.Helper()
	var fresh testv1.Widget
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &fresh))
	c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
	fresh.Status.Conditions = []metav1.Condition{c}
	return env.Client.Status().Update(t.Context(), &fresh)
}

// requireSemanticallyEqual compares conditions as the apiserver stores them
// (equality.Semantic compares times by instant), reporting differences
// compactly because messages are too long to print.
func requireSemanticallyEqual(t *testing.T, want, got []metav1.Condition) {
	t.Helper()
	if equality.Semantic.DeepEqual(want, got) {
		return
	}
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		if g.Message != w.Message {
			n := 0
			for n < len(w.Message) && n < len(g.Message) && w.Message[n] == g.Message[n] {
				n++
			}
			t.Errorf("%s: message differs at byte %d (%d vs %d bytes)", w.Type, n, len(w.Message), len(g.Message))
		}
		w.Message, g.Message = "", ""
		if !equality.Semantic.DeepEqual(w, g) {
			t.Errorf("condition %d differs:\nwant %+v\ngot  %+v", i, w, g)
		}
	}
	t.FailNow()
}
