package conditions_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconcilekit/reconcilekit/conditions"
)

func TestSummaryApply(t *testing.T) {
	const (
		T = metav1.ConditionTrue
		F = metav1.ConditionFalse
		U = metav1.ConditionUnknown
	)
	tests := []struct {
		name        string
		summary     conditions.ReadySummary
		existing    []metav1.Condition
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{
			name:       "no dependents is Ready",
			summary:    conditions.NewReadySummary(),
			wantStatus: T, wantReason: conditions.ReasonSucceeded,
		},
		{
			name:     "all dependents True",
			summary:  conditions.NewReadySummary("Synced", "Available"),
			existing: []metav1.Condition{cond("Synced", T, "Applied", "x"), cond("Available", T, "Up", "y")},
			// Ready says what is ready: the last dependent, the last fact
			// established (a rollout after the objects it rolls out).
			wantStatus: T, wantReason: "Up", wantMessage: "y",
		},
		{
			name:       "True reason and message overridden",
			summary:    conditions.NewReadySummary("Synced").WithReadyReason("Serving", "listening on :443"),
			existing:   []metav1.Condition{cond("Synced", T, "Applied", "")},
			wantStatus: T, wantReason: "Serving", wantMessage: "listening on :443",
		},
		{
			name:       "override does not apply when not all True",
			summary:    conditions.NewReadySummary("Synced").WithReadyReason("Serving", "listening"),
			existing:   []metav1.Condition{cond("Synced", F, "ApplyFailed", "denied")},
			wantStatus: F, wantReason: "ApplyFailed", wantMessage: "denied",
		},
		{
			name:       "a False dependent makes Ready False with its reason and message",
			summary:    conditions.NewReadySummary("Synced", "Available"),
			existing:   []metav1.Condition{cond("Synced", T, "Applied", ""), cond("Available", F, "ReplicasUnavailable", "1/3 ready")},
			wantStatus: F, wantReason: "ReplicasUnavailable", wantMessage: "1/3 ready",
		},
		{
			name:       "an Unknown dependent makes Ready Unknown",
			summary:    conditions.NewReadySummary("Synced", "Available"),
			existing:   []metav1.Condition{cond("Synced", U, "Applying", "in flight"), cond("Available", T, "Up", "")},
			wantStatus: U, wantReason: "Applying", wantMessage: "in flight",
		},
		{
			name:       "first non-True in declared order wins over a later False",
			summary:    conditions.NewReadySummary("Synced", "Available"),
			existing:   []metav1.Condition{cond("Synced", U, "Applying", "in flight"), cond("Available", F, "Down", "no pods")},
			wantStatus: U, wantReason: "Applying", wantMessage: "in flight",
		},
		{
			name:       "declared order, not condition order, decides",
			summary:    conditions.NewReadySummary("Zeta", "Alpha"),
			existing:   []metav1.Condition{cond("Alpha", F, "AlphaBroken", "a"), cond("Zeta", F, "ZetaBroken", "z")},
			wantStatus: F, wantReason: "ZetaBroken", wantMessage: "z",
		},
		{
			name:       "an absent dependent makes Ready Unknown and is named",
			summary:    conditions.NewReadySummary("Synced", "Available"),
			existing:   []metav1.Condition{cond("Synced", T, "Applied", "")},
			wantStatus: U, wantReason: conditions.ReasonDependencyMissing, wantMessage: `condition "Available" has not been reported yet`,
		},
		{
			name:       "a previous Ready is replaced",
			summary:    conditions.NewReadySummary("Synced"),
			existing:   []metav1.Condition{cond(conditions.Ready, T, "Succeeded", ""), cond("Synced", F, "ApplyFailed", "denied")},
			wantStatus: F, wantReason: "ApplyFailed", wantMessage: "denied",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widget(5, tt.existing...)
			require.NoError(t, tt.summary.SetReady(w))

			ready := conditions.Get(w, conditions.Ready)
			require.NotNil(t, ready)
			assert.Equal(t, tt.wantStatus, ready.Status)
			assert.Equal(t, tt.wantReason, ready.Reason)
			assert.Equal(t, tt.wantMessage, ready.Message)
			assert.Equal(t, int64(5), ready.ObservedGeneration)
			assert.Equal(t, conditions.Ready, w.Status.Conditions[0].Type, "Ready comes first")

			again := w.DeepCopy()
			require.NoError(t, tt.summary.SetReady(again))
			assert.Equal(t, w.Status.Conditions, again.Status.Conditions, "a second Apply changes nothing")
		})
	}
}

func TestSummaryApplyRejectsKstatusDependents(t *testing.T) {
	for _, dep := range []string{conditions.Ready, conditions.Reconciling, conditions.Stalled} {
		t.Run(dep, func(t *testing.T) {
			w := widget(1, cond(dep, metav1.ConditionTrue, "R", ""))
			before := w.DeepCopy()
			err := conditions.NewReadySummary("Synced", dep).SetReady(w)
			require.Error(t, err)
			assert.Contains(t, err.Error(), dep)
			assert.Equal(t, before, w)
		})
	}
}

func TestSummaryApplyReportsInvalidTrueReason(t *testing.T) {
	w := widget(1)
	err := conditions.NewReadySummary().WithReadyReason("not valid", "").SetReady(w)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reason")
	assert.Nil(t, w.Status.Conditions)
}

func TestSummaryDependentsIsACopy(t *testing.T) {
	deps := []string{"Synced", "Available"}
	s := conditions.NewReadySummary(deps...)
	deps[0] = "Changed"
	got := s.Dependents()
	assert.Equal(t, []string{"Synced", "Available"}, got)
	got[1] = "Changed"
	assert.Equal(t, []string{"Synced", "Available"}, s.Dependents())
}
