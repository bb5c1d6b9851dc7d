package bench

import (
	"fmt"
	"math"
	"strings"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// FastPathLine is the least a fast path must save to stay: 3% of the
// operator's CPU or heap in some phase. One that saves less in every
// phase goes, in favour of the upstream route: less code to trust.
const FastPathLine = 0.03

// fastPathFigure is one figure a fast path is judged on: a phase's CPU or
// heap allocated per WebApp, or the heap live with the fleet converged.
type fastPathFigure struct {
	phase, what string
	get         func(ImplResult) float64
	render      func(float64) string
}

// fastPathPhases are the columns of the fast-path summary, each the
// figures of one phase.
var fastPathPhases = []string{"convergence", "no-op resync", "image update", "deletion", "converged fleet"}

// fastPathFigures are the figures of a run of n WebApps, in the order of
// fastPathPhases.
func fastPathFigures(n int) []fastPathFigure {
	kibPer := func(v float64) string { return fmt.Sprintf("%.1f KiB", v/1024) }
	var figs []fastPathFigure
	for i, get := range []func(ImplResult) Phase{
		func(i ImplResult) Phase { return i.Converge }, func(i ImplResult) Phase { return i.Resync },
		func(i ImplResult) Phase { return i.Update }, func(i ImplResult) Phase { return i.Delete },
	} {
		figs = append(figs,
			fastPathFigure{fastPathPhases[i], "CPU per WebApp", func(r ImplResult) float64 { return float64(cpuPer(get(r).CPU, n)) }, msf},
			fastPathFigure{fastPathPhases[i], "heap allocated per WebApp",
				func(r ImplResult) float64 { return float64(get(r).HeapAlloc) / float64(max(n, 1)) }, kibPer})
	}
	return append(figs, fastPathFigure{fastPathPhases[4], fmt.Sprintf("heap after GC, %d WebApps", n),
		func(r ImplResult) float64 { return float64(r.Memory.HeapLive) }, mibf})
}

// saving is one figure with a fast path on (the operator as shipped) and
// off, over the same rounds.
type saving struct{ on, off spread }

// measured reports whether the figure was read in both (a report from
// before heap allocations were read has none).
func (s saving) measured() bool { return s.on.N > 0 && s.off.N > 0 && (s.on.Max > 0 || s.off.Max > 0) }

// percent is what the fast path saves, in % of the figure with it on:
// (off − on) ÷ on, of the medians; NaN when on is 0.
func (s saving) percent() float64 {
	if s.on.Median == 0 {
		return math.NaN()
	}
	return (s.off.Median - s.on.Median) / s.on.Median * 100
}

// judgement says whether the fast path pays in this figure: "pays" when
// every reading off lies above FastPathLine more than every reading on,
// "does not pay" when every one lies at most that, else "within noise".
func (s saving) judgement() string {
	switch s.off.against(s.on.scaled(1 + FastPathLine)) {
	case above:
		return "pays"
	case atMost:
		return "does not pay"
	}
	return "within noise"
}

// String is the saving in % and its judgement.
func (s saving) String() string {
	if !s.measured() {
		return "—"
	}
	pct := "n/a"
	if p := s.percent(); !math.IsNaN(p) {
		pct = fmt.Sprintf("%+.1f%%", p)
	}
	return pct + " " + s.judgement()
}

// fastPathVerdict is a fast path's verdict on its savings: it pays when it
// pays in some figure; it does not pay when it does not in any measured
// one; else within noise.
func fastPathVerdict(savings []saving) string {
	measured, short := 0, 0
	for _, s := range savings {
		if !s.measured() {
			continue
		}
		measured++
		switch s.judgement() {
		case "pays":
			return "pays"
		case "does not pay":
			short++
		}
	}
	switch {
	case measured == 0:
		return "not measured"
	case short == measured:
		return "does not pay: remove it"
	}
	return "within noise"
}

// offRounds are the reconcilekit operator's figures with the fast path
// name off, in every round that ran it.
func (r *Report) offRounds(name string) []ImplResult {
	var out []ImplResult
	for _, rd := range r.Result.Rounds() {
		if res, ok := rd.Off[name]; ok {
			out = append(out, res)
		}
	}
	return out
}

// fastPath is the description of the fast path name: the one the run
// counted, else FastPaths' (its lines not counted).
func (r *Report) fastPath(name string) FastPath {
	for _, list := range [][]FastPath{r.FastPaths, FastPaths} {
		for _, f := range list {
			if f.Name == name {
				return f
			}
		}
	}
	return FastPath{Name: name}
}

// fastPathsMarkdown renders the fast-path section under heading: a row
// per fast path the run switched off, with its code, its saving per phase
// and its verdict, then every figure with it on and off. Empty when the
// run switched none off.
func (r *Report) fastPathsMarkdown(heading string) string {
	res := r.Result
	if len(res.Config.FastPathsOff) == 0 {
		return ""
	}
	var b strings.Builder
	t := table{&b}
	ours := r.columns()[0]
	figs := fastPathFigures(res.Config.N)
	savings := map[string][]saving{}
	for _, name := range res.Config.FastPathsOff {
		off := r.offRounds(name)
		for _, f := range figs {
			savings[name] = append(savings[name], saving{on: over(ours, f.get), off: over(off, f.get)})
		}
	}

	b.WriteString(heading + "\n\n")
	b.WriteString("A fast path is code the library runs in place of an upstream route, because it was measured to cost less;\n")
	b.WriteString("it stays only where it pays. Every round also ran the reconcilekit operator once per fast path with that one\n")
	fmt.Fprintf(&b, "switched off (`%s=<name>`, `internal/fastpath`), taking the upstream route, without the\n", fastpath.Env)
	b.WriteString("unrelated objects. A saving is (off − on) ÷ on of the medians, on being the operator as shipped in the same\n")
	fmt.Fprintf(&b, "rounds. In one figure, a fast path pays when every reading with it off lies above %.0f%% more than every\n", FastPathLine*100)
	b.WriteString("reading with it on, and does not pay when every one lies at most that; else the figure is within noise. The\n")
	b.WriteString("verdict: it pays when it pays in some figure (a phase's operator CPU or heap allocated, or the heap of the\n")
	b.WriteString("converged fleet); it does not pay, and goes in favour of the upstream route, when it pays in none; else within\n")
	b.WriteString("noise (more rounds or a larger N may tell). Lines of code: the lines that hold code (not comments or blank\n")
	b.WriteString("ones) of the files and declarations only it needs; its switch and call sites are not counted.\n\n")

	header := append([]string{"fast path", "instead of the upstream route", "lines of code"}, fastPathPhases...)
	t.header(append(header, "verdict")...)
	for _, name := range res.Config.FastPathsOff {
		fp := r.fastPath(name)
		lines := "not counted"
		if fp.Lines > 0 {
			var code []string
			for _, c := range fp.Code {
				code = append(code, c.String())
			}
			lines = fmt.Sprintf("%d (%s)", fp.Lines, strings.Join(code, "; "))
		}
		cells := []string{"`" + name + "`", fp.Instead, lines}
		for _, ph := range fastPathPhases {
			var parts []string
			for i, f := range figs {
				if f.phase == ph {
					parts = append(parts, fastPathShort(f.what)+" "+savings[name][i].String())
				}
			}
			cells = append(cells, strings.Join(parts, "; "))
		}
		t.row(append(cells, fastPathVerdict(savings[name]))...)
	}
	b.WriteString("\n")

	t.header("fast path", "figure", "on (as shipped)", "off", "saving")
	for _, name := range res.Config.FastPathsOff {
		for i, f := range figs {
			s := savings[name][i]
			t.row("`"+name+"`", f.phase+": "+f.what, s.on.cell(f.render), s.off.cell(f.render), s.String())
		}
	}
	b.WriteString("\n")
	return b.String()
}

// fastPathShort names a figure in the summary's cells.
func fastPathShort(what string) string {
	switch {
	case strings.HasPrefix(what, "CPU"):
		return "CPU"
	case strings.HasPrefix(what, "heap allocated"):
		return "heap allocated"
	}
	return "heap"
}
