package bench

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// figures are what fakeImpl fills in: CPU (ms per WebApp) and heap
// allocated (KiB per WebApp) of the four phases, and the heap live after
// GC (MiB).
type figures struct {
	cpu   [4]float64
	alloc [4]float64
	heap  float64
}

// scaled returns f with every figure times k.
func (f figures) scaled(k float64) figures {
	for i := range f.cpu {
		f.cpu[i] *= k
		f.alloc[i] *= k
	}
	f.heap *= k
	return f
}

func fakeImpl(name string, n int, f figures) ImplResult {
	phase := func(i int) Phase {
		return Phase{CPU: time.Duration(f.cpu[i] * float64(n) * float64(time.Millisecond)), HeapAlloc: int64(f.alloc[i] * float64(n) * 1024),
			Reconciles: n}
	}
	return ImplResult{Name: name, Converge: phase(0), Resync: phase(1), Update: phase(2), Delete: phase(3),
		Memory: Memory{HeapLive: int64(f.heap * (1 << 20)), GCObserved: true}}
}

// roundsReport is a run of three rounds whose readings differ by 1% from
// one round to the next: the idiomatic peer spends twice the CPU
// converging and as much updating (within 0.5%); statuspatch saves half
// the CPU converging, verdicts nothing, intern 3% of the heap.
func roundsReport() *Report {
	const n = 100
	ours := figures{cpu: [4]float64{10, 2, 10, 4}, alloc: [4]float64{50, 10, 50, 20}, heap: 20}
	idiomatic := ours
	idiomatic.cpu[0] *= 2
	idiomatic.cpu[2] *= 1.005
	cfg := Config{N: n, Repeat: 3, FastPathsOff: []string{"statuspatch", "verdicts", "intern"}}
	res := &Result{Config: cfg}
	for r, k := range []float64{1, 1.01, 1.02} {
		statuspatch := ours
		statuspatch.cpu[0] *= 2
		intern := ours
		intern.heap *= 1.03
		rd := Round{
			Ours: fakeImpl("reconcilekit", n, ours.scaled(k)), Idiomatic: fakeImpl("idiomatic", n, idiomatic.scaled(k)),
			Baseline: fakeImpl("baseline", n, ours.scaled(3*k)),
			Off: map[string]ImplResult{
				"statuspatch": fakeImpl(offName("statuspatch"), n, statuspatch.scaled(k)),
				"verdicts":    fakeImpl(offName("verdicts"), n, ours.scaled(k)),
				"intern":      fakeImpl(offName("intern"), n, intern.scaled(k)),
			},
		}
		if r == 0 {
			res.Round = rd
		} else {
			res.Repeats = append(res.Repeats, rd)
		}
	}
	return &Report{Command: "test", Result: res,
		FastPaths: []FastPath{{Name: "statuspatch", Instead: "its own patch", Code: []Code{{File: "reconciler/status.go", Decls: []string{"statusPatch"}}}, Lines: 42}}}
}

// row returns the table row of md whose first cell is first, or fails.
func row(t *testing.T, md, first string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(first) + ` \|.*$`).FindString(md)
	require.NotEmpty(t, m, "no row %q in:\n%s", first, md)
	return m
}

// TestGoalsOverRounds: a goal whose ranges lie clear of its line gets a
// verdict on the medians; one whose ranges straddle it gets none.
func TestGoalsOverRounds(t *testing.T) {
	goals := roundsReport().Goals()
	byName := map[string]Goal{}
	for _, g := range goals {
		byName[g.Goal] = g
	}
	conv := byName["CPU per converged WebApp ≤ 1.0× the idiomatic peer's"]
	assert.Equal(t, "PASS (0.50×)", conv.Verdict)
	assert.Equal(t, "10.10 ms (10.00 ms–10.20 ms)", conv.Ours, "the median and the range")
	update := byName["CPU per updated WebApp ≤ 1.0× the idiomatic peer's"]
	assert.True(t, strings.HasPrefix(update.Verdict, "within noise ("), "ranges that overlap: %q", update.Verdict)
	assert.Equal(t, "PASS", byName["no-op resync: 0 mutating requests for us (the idiomatic peer makes at least 2 per WebApp)"].Verdict)
}

// TestFastPathsSection: a fast path that saves more than the line in some
// figure, every range clear of it, pays; one that saves nothing, in
// ranges clear of the line, does not pay; one whose ranges straddle it is
// within noise.
func TestFastPathsSection(t *testing.T) {
	md := roundsReport().Markdown()
	require.Contains(t, md, "## 6. Fast paths")
	section := md[strings.Index(md, "## 6. Fast paths"):strings.Index(md, "## Details")]

	statuspatch := row(t, section, "`statuspatch`")
	assert.Contains(t, statuspatch, "| its own patch | 42 (`reconciler/status.go`: statusPatch) |")
	assert.Contains(t, statuspatch, "| CPU +100.0% pays; heap allocated +0.0% does not pay |", "convergence")
	assert.True(t, strings.HasSuffix(statuspatch, "| pays |"), statuspatch)

	verdicts := row(t, section, "`verdicts`")
	assert.Contains(t, verdicts, "not counted", "a fast path the run did not count")
	assert.True(t, strings.HasSuffix(verdicts, "| does not pay: remove it |"), verdicts)

	intern := row(t, section, "`intern`")
	assert.Contains(t, intern, "| heap +3.0% within noise |", "the converged fleet's heap")
	assert.True(t, strings.HasSuffix(intern, "| within noise |"), intern)

	assert.Contains(t, section, "| `statuspatch` | convergence: CPU per WebApp | 10.10 ms (10.00 ms–10.20 ms) | 20.20 ms (20.00 ms–20.40 ms) | +100.0% pays |")
	assert.Contains(t, section, "| `intern` | converged fleet: heap after GC, 100 WebApps | 20.2 MiB (20.0 MiB–20.4 MiB) | 20.8 MiB (20.6 MiB–21.0 MiB) | +3.0% within noise |")

	// The three-peer tables give the median and the range too, and the
	// ratio of the medians.
	assert.Equal(t, "| CPU per converged WebApp | 10.10 ms (10.00 ms–10.20 ms) | 20.20 ms (20.00 ms–20.40 ms) | 30.30 ms (30.00 ms–30.60 ms) | 0.50× | 0.33× |",
		row(t, md, "CPU per converged WebApp"))
	assert.Contains(t, md, "Each operator ran 3 rounds, interleaved")
}

// TestOneRoundReport: a report of one round, as saved before -repeat,
// shows single readings and no fast-path section.
func TestOneRoundReport(t *testing.T) {
	r := threePeers(100)
	md := r.Markdown()
	assert.Equal(t, "| CPU per converged WebApp | 10.00 ms | 12.00 ms | 8.00 ms | 0.83× | 1.25× |", row(t, md, "CPU per converged WebApp"))
	assert.NotContains(t, md, "Fast paths")
	assert.Contains(t, md, "One round: each figure is one reading")
}

// TestResultJSON: a report saved before rounds (the three operators at
// the top of Result) reads as one round; a report of several keeps its
// first round there and the others in Repeats.
func TestResultJSON(t *testing.T) {
	var old Result
	require.NoError(t, json.Unmarshal([]byte(`{"Config":{"N":3},"Ours":{"Name":"reconcilekit","Converge":{"CPU":3000000}},"Idiomatic":{"Name":"idiomatic"}}`), &old))
	require.Len(t, old.Rounds(), 1)
	assert.Equal(t, "reconcilekit", old.Rounds()[0].Ours.Name)
	assert.Equal(t, 3*time.Millisecond, old.Ours.Converge.CPU)

	b, err := json.Marshal(roundsReport().Result)
	require.NoError(t, err)
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &fields))
	assert.Contains(t, fields, "Ours", "the first round where a one-round report has it")
	assert.Contains(t, fields, "Off")
	assert.Contains(t, fields, "Repeats")
	var back Result
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Len(t, back.Rounds(), 3)
	assert.Equal(t, roundsReport().Result.Rounds(), back.Rounds())
}
