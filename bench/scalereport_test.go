package bench

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScaleMarkdown(t *testing.T) {
	md := scaleRun(1000).Markdown()
	for _, want := range []string{
		"## N = 1000: a fleet converged, restarted under each operator, deleted",
		"The tutorial baseline cannot take this fleet over.",
		"| restart over a converged fleet: 0 mutating requests | 0 | 1000 | PASS |",
		"| heap per WebApp at 1000 ≤ 1.0× the idiomatic peer's | 102.4 KiB | 122.9 KiB | PASS (0.83×) |",
		"| 1000 WebApps converged from zero and deleted: registry empty, nothing left | 0 registry entries, 0 objects left | — | PASS |",
		"|  | reconcilekit | baseline (its own fleet) |",
		"| time to all Ready | 100.00 s | 100.00 s |",
		"| requests: create | 1000 | 1000 |",
		"|  | reconcilekit | idiomatic | baseline | reconcilekit ÷ idiomatic |",
		"| fleet | reconcilekit's | reconcilekit's | its own |  |",
		"| mutating requests per WebApp | 0.00 | 1.00 | 3.00 | 0.00× |",
		"| heap after GC, 1000 WebApps | 100.0 MiB | 120.0 MiB | 150.0 MiB | 0.83× |",
		"- reconcilekit: none\n- idiomatic: 1000 apply deployments.apps\n",
		"baseline: no GC cycle completed within the wait",
		"| mutating requests | 2000 apply deployments.apps | none |",
		"| Deployments whose spec it changed (a rollout) | 0 | 0 | 0 | = |",
		"| objects left in the namespace | 0 Deployments, 0 ReplicaSets, 0 Pods, 0 Services, 0 WebApps |",
		"![Converging 1000 WebApps from zero: Ready over time](performance/scale-convergence.svg)",
		"![Starting over 1000 converged WebApps: reconciles over time](performance/scale-restart.svg)",
		"(performance/scale-cpu.svg)", "(performance/heap.svg)",
	} {
		assert.Contains(t, md, want)
	}
}

// TestScaleMarkdownFindsALeak: a registry entry or an object left fails
// the deletion goal.
func TestScaleMarkdownFindsALeak(t *testing.T) {
	r := scaleRun(10)
	r.Result.Left["Pods"] = 2
	assert.Equal(t, "BEHIND", r.ScaleGoals()[2].Verdict)
	r = scaleRun(10)
	r.Result.RegistryLeft = 1
	assert.Equal(t, "BEHIND", r.ScaleGoals()[2].Verdict)
}

// TestScaleMarkdownAlone: without the peers (-peers reconcilekit) the
// report has no ratio and no takeover.
func TestScaleMarkdownAlone(t *testing.T) {
	r := scaleRun(10)
	r.Result.Restarts = r.Result.Restarts[:1]
	r.Result.Takeback = Phase{}
	md := r.Markdown()
	assert.Contains(t, md, "| heap per WebApp at 10 ≤ 1.0× the idiomatic peer's | 10240.0 KiB | — | n/a (no idiomatic peer) |")
	assert.NotContains(t, md, "÷ idiomatic")
	assert.NotContains(t, md, "Taking the fleet over")
	assert.NotContains(t, md, "cannot take this fleet over")
}

// TestScaleReportJSON: a saved scale report renders the same page again
// (bench -scale -render).
func TestScaleReportJSON(t *testing.T) {
	r := scaleRun(100)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back ScaleReport
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, r.Markdown(), back.Markdown())
}
