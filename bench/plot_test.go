package bench

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordKeepsTheShape(t *testing.T) {
	var s []Sample
	for _, p := range []Sample{{0, 0}, {250 * time.Millisecond, 0}, {500 * time.Millisecond, 3}, {750 * time.Millisecond, 3},
		{2 * time.Second, 3}, {2250 * time.Millisecond, 9}} {
		s = record(s, p)
	}
	assert.Equal(t, []Sample{{0, 0}, {500 * time.Millisecond, 3}, {2 * time.Second, 3}, {2250 * time.Millisecond, 9}}, s,
		"a reading within a second of the last with the same N adds nothing; a change always does")
}

const mib1 = 1 << 20

// threePeers is a three-peer run of n WebApps with readings enough for
// its figures.
func threePeers(n int) *Report {
	peer := func(name string, cpu time.Duration, heap int64) ImplResult {
		return ImplResult{Name: name,
			Converge:      Phase{CPU: cpu, Progress: []Sample{{0, 0}, {time.Second, n / 2}, {2 * time.Second, n}}},
			Resync:        Phase{CPU: cpu / 10},
			Update:        Phase{CPU: cpu},
			Delete:        Phase{CPU: cpu / 4},
			Memory:        Memory{HeapLive: heap, GCObserved: true},
			MemoryStartup: Memory{HeapLive: 5 * mib1},
		}
	}
	return &Report{Command: "test", Result: &Result{
		Config: Config{N: n},
		Raw:    RawResult{Elapsed: time.Second, Progress: []Sample{{0, 0}, {time.Second, n}}},
		Round: Round{
			Ours:      peer("reconcilekit", time.Duration(n)*10*time.Millisecond, 20*mib1),
			Idiomatic: peer("idiomatic", time.Duration(n)*12*time.Millisecond, 22*mib1),
			Baseline:  peer("baseline", time.Duration(n)*8*time.Millisecond, 30*mib1),
		},
	}}
}

// scaleRun is a scale run of n WebApps: reconcilekit's fleet, the
// idiomatic peer's takeover and restart, the baseline's own fleet.
func scaleRun(n int) *ScaleReport {
	restart := func(name string, writes int, heap int64) Phase {
		c := Counts{{Verb: "list", Group: "apps.example.com", Resource: "webapps"}: {N: 1}}
		if writes > 0 {
			c[Key{Verb: "apply", Group: "apps", Resource: "deployments"}] = Stat{N: writes}
		}
		return Phase{Elapsed: 20 * time.Second, Client: c, Reconciles: n, CPU: time.Duration(heap / 1000),
			Progress: []Sample{{time.Second, 0}, {10 * time.Second, n}}}
	}
	converged := Phase{Elapsed: 100 * time.Second, CPU: 30 * time.Second, Reconciles: 3 * n,
		Client:   Counts{{Verb: "create", Group: "apps", Resource: "deployments"}: {N: n}},
		Progress: []Sample{{0, 0}, {50 * time.Second, n / 3}, {100 * time.Second, n}}}
	return &ScaleReport{Command: "test", Took: 3 * time.Minute, Result: &ScaleResult{
		Config:        Config{N: n, Reconcilers: 4},
		MemoryStartup: Memory{HeapLive: 6 * mib1},
		Converge:      converged,
		Registry:      Registry{Entries: n, Objects: 16, LargestBytes: 4096},
		Restarts: []Restart{
			{Name: "reconcilekit", Fleet: "reconcilekit", Restart: restart("reconcilekit", 0, 100*mib1), Memory: Memory{HeapLive: 100 * mib1, RSS: 200 * mib1, GCObserved: true}},
			{Name: "idiomatic", Fleet: "reconcilekit", Takeover: restart("idiomatic", 2*n, 0), Restart: restart("idiomatic", n, 120*mib1),
				Memory: Memory{HeapLive: 120 * mib1, RSS: 210 * mib1, GCObserved: true}},
			{Name: "baseline", Fleet: "own", Converge: converged, Restart: restart("baseline", 3*n, 150*mib1), Memory: Memory{HeapLive: 150 * mib1, RSS: 260 * mib1}},
		},
		Takeback:  Phase{Elapsed: 30 * time.Second, CPU: time.Second},
		Delete:    Phase{Elapsed: 40 * time.Second, CPU: 4 * time.Second},
		Left:      map[string]int{"Deployments": 0, "ReplicaSets": 0, "Pods": 0, "Services": 0, "WebApps": 0},
		Collected: 5 * time.Second,
	}}
}

func figure(t *testing.T, figs []Figure, file string) Figure {
	t.Helper()
	for _, f := range figs {
		if f.File == file {
			return f
		}
	}
	t.Fatalf("no figure %s", file)
	return Figure{}
}

func names(ss []Series) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestThreePeerFigures(t *testing.T) {
	figs := threePeers(100).Figures(nil)
	conv := figure(t, figs, "bench-convergence.svg")
	assert.Equal(t, []string{"raw client, Deployments ready (the floor)", "reconcilekit", "idiomatic", "baseline"}, names(conv.Lines))
	assert.Equal(t, []XY{{0, 0}, {1, 50}, {2, 100}}, conv.Lines[1].Points, "seconds against WebApps Ready")
	assert.Equal(t, []XY{{0, 0}, {1, 1}}, progress("x", []Sample{{time.Second, 1}}).Points, "every count starts at 0")

	cpu := figure(t, figs, "bench-cpu.svg")
	require.Len(t, cpu.Bars.Series, 3)
	assert.Equal(t, "reconcilekit", cpu.Bars.Series[0].Name)
	assert.InDeltaSlice(t, []float64{10, 1, 10, 2.5}, cpu.Bars.Series[0].Values, 1e-9, "ms of CPU per WebApp by phase")

	heap := figure(t, figs, "heap.svg")
	assert.Equal(t, []XY{{0, 5}, {100, 20}}, heap.Lines[0].Points, "startup and N, in MiB")
}

func TestScaleFigures(t *testing.T) {
	run := scaleRun(1000)
	figs := run.Figures(threePeers(100))
	conv := figure(t, figs, "scale-convergence.svg")
	assert.Equal(t, []string{"reconcilekit", "baseline (its own fleet)"}, names(conv.Lines))
	restart := figure(t, figs, "scale-restart.svg")
	assert.Equal(t, []string{"reconcilekit", "idiomatic, taking the fleet over", "idiomatic", "baseline"}, names(restart.Lines))
	cpu := figure(t, figs, "scale-cpu.svg")
	assert.Equal(t, []float64{30, 1, (100 * mib1 / 1000 * time.Nanosecond).Seconds(), 4}, cpu.Bars.Series[0].Values, "reconcilekit: converge, take back, restart, delete")
	assert.Equal(t, []float64{30, 0, (150 * mib1 / 1000 * time.Nanosecond).Seconds(), 0}, cpu.Bars.Series[2].Values, "baseline: its own fleet, no takeover")

	heap := figure(t, figs, "heap.svg")
	assert.Equal(t, []string{"reconcilekit", "idiomatic", "baseline"}, names(heap.Lines))
	assert.Equal(t, []XY{{0, 5}, {100, 20}, {1000, 100}}, heap.Lines[0].Points,
		"the three-peer run's startup and N, then the scale run's N (its own startup reading loses to the first)")
	alone := HeapFigure(nil, run)
	assert.Equal(t, []XY{{0, 6}, {1000, 100}}, alone.Lines[0].Points, "without a three-peer run: the scale run's startup")
}

func TestFigureEmpty(t *testing.T) {
	assert.True(t, Figure{Lines: []Series{{Name: "reconcilekit"}}}.Empty(), "no point")
	assert.True(t, Figure{Bars: &Bars{}}.Empty())
	assert.False(t, Figure{Lines: []Series{{Name: "x", Points: []XY{{1, 1}}}}}.Empty())
	assert.Equal(t, "![Heap](performance/heap.svg)\n", Figure{File: "heap.svg", Title: "Heap"}.Markdown())
}

// TestFigureSVG: every figure renders to well-formed SVG that names its
// title and every series.
func TestFigureSVG(t *testing.T) {
	for _, f := range append(threePeers(100).Figures(nil), scaleRun(1000).Figures(nil)...) {
		svg, err := f.SVG()
		require.NoError(t, err, f.File)
		dec := xml.NewDecoder(strings.NewReader(string(svg)))
		for {
			if _, err := dec.Token(); err != nil {
				assert.Equal(t, "EOF", err.Error(), "%s: not well-formed XML", f.File)
				break
			}
		}
		assert.Contains(t, string(svg), "<svg", f.File)
		assert.Contains(t, string(svg), f.Title, f.File)
		series := names(f.Lines)
		if f.Bars != nil {
			for _, s := range f.Bars.Series {
				series = append(series, s.Name)
			}
		}
		for _, name := range series {
			assert.Contains(t, string(svg), name, "%s: legend", f.File)
		}
	}
}
