package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// FigureDir is where the figures go, relative to the directory of the
// report's page (docs/performance.md: docs/performance/).
const FigureDir = "performance"

// XY is one point of a Series.
type XY struct{ X, Y float64 }

// Series is one curve of a figure: an operator's figure against time or N.
type Series struct {
	Name   string
	Points []XY
}

// Bars is a grouped bar chart: in each group, one bar per series.
type Bars struct {
	Groups []string
	Series []BarSeries
}

// BarSeries is one operator's bars, a value per group.
type BarSeries struct {
	Name   string
	Values []float64
}

// Figure is one plot of a run, rendered to FigureDir/File by SVG: Lines
// (with Marks, a mark at each point) or Bars.
type Figure struct {
	File, Title, XLabel, YLabel string
	Lines                       []Series
	Marks                       bool
	Bars                        *Bars
}

// Empty reports whether the figure has nothing to draw (a run without a
// controller-manager records no Ready curve, for one).
func (f Figure) Empty() bool {
	for _, s := range f.Lines {
		if len(s.Points) > 0 {
			return false
		}
	}
	return f.Bars == nil || len(f.Bars.Series) == 0
}

// Markdown is the figure embedded in the page.
func (f Figure) Markdown() string { return fmt.Sprintf("![%s](%s/%s)\n", f.Title, FigureDir, f.File) }

// progress is a phase's Samples as a Series: seconds against N, from
// (0, 0), where every phase's count starts.
func progress(name string, samples []Sample) Series {
	s := Series{Name: name}
	if len(samples) > 0 && samples[0].At > 0 {
		s.Points = append(s.Points, XY{})
	}
	for _, p := range samples {
		s.Points = append(s.Points, XY{X: p.At.Seconds(), Y: float64(p.N)})
	}
	return s
}

// Figures are the plots of a three-peer run: WebApps Ready over time per
// operator in the first round (and the raw client's Deployments), CPU per
// phase and heap against N, the medians over the rounds, with the points
// of scale (nil: none).
func (r *Report) Figures(scale *ScaleReport) []Figure {
	res := r.Result
	n := res.Config.N
	conv := Figure{File: "bench-convergence.svg", Title: fmt.Sprintf("Converging %d WebApps: Ready over time", n),
		XLabel: "seconds since the first create", YLabel: "WebApps Ready"}
	if len(res.Raw.Progress) > 0 {
		conv.Lines = append(conv.Lines, progress("raw client, Deployments ready (the floor)", res.Raw.Progress))
	}
	cpu := Figure{File: "bench-cpu.svg", Title: "Operator CPU per WebApp, by phase", YLabel: "ms of CPU per WebApp",
		Bars: &Bars{Groups: []string{"convergence", "no-op resync", "image update", "deletion"}}}
	for _, rounds := range r.columns() {
		p := rounds[0]
		if p.Name == "" {
			continue
		}
		conv.Lines = append(conv.Lines, progress(p.Name, p.Converge.Progress))
		// The median over the rounds.
		per := func(get func(ImplResult) Phase) float64 {
			return over(rounds, func(i ImplResult) float64 { return float64(cpuPer(get(i).CPU, n)) }).Median / float64(time.Millisecond)
		}
		cpu.Bars.Series = append(cpu.Bars.Series, BarSeries{Name: p.Name, Values: []float64{
			per(func(i ImplResult) Phase { return i.Converge }), per(func(i ImplResult) Phase { return i.Resync }),
			per(func(i ImplResult) Phase { return i.Update }), per(func(i ImplResult) Phase { return i.Delete }),
		}})
	}
	return []Figure{conv, cpu, HeapFigure(r, scale)}
}

// Figures are the plots of a scale run: WebApps Ready over time while
// converging from zero, reconciles over time while each operator starts
// over the converged fleet, CPU per phase, and heap against N with the
// points of bench (nil: none).
func (r *ScaleReport) Figures(bench *Report) []Figure {
	res := r.Result
	n := res.Config.N
	conv := Figure{File: "scale-convergence.svg", Title: fmt.Sprintf("Converging %d WebApps from zero: Ready over time", n),
		XLabel: "seconds since the first create", YLabel: "WebApps Ready",
		Lines: []Series{progress("reconcilekit", res.Converge.Progress)}}
	restart := Figure{File: "scale-restart.svg", Title: fmt.Sprintf("Starting over %d converged WebApps: reconciles over time", n),
		XLabel: "seconds since the process started", YLabel: "reconciles run"}
	groups := []string{"converge from zero", "take over", "restart", "delete"}
	cpu := Figure{File: "scale-cpu.svg", Title: fmt.Sprintf("Operator CPU by phase, %d WebApps", n), YLabel: "seconds of CPU",
		Bars: &Bars{Groups: groups}}
	secs := func(p Phase) float64 { return p.CPU.Seconds() }
	for _, rs := range res.Restarts {
		bars := BarSeries{Name: rs.Name, Values: make([]float64, len(groups))}
		if rs.Fleet == "own" {
			conv.Lines = append(conv.Lines, progress(rs.Name+" (its own fleet)", rs.Converge.Progress))
			bars.Values[0] = secs(rs.Converge)
		}
		if len(rs.Takeover.Progress) > 0 {
			restart.Lines = append(restart.Lines, progress(rs.Name+", taking the fleet over", rs.Takeover.Progress))
			bars.Values[1] = secs(rs.Takeover)
		}
		restart.Lines = append(restart.Lines, progress(rs.Name, rs.Restart.Progress))
		bars.Values[2] = secs(rs.Restart)
		if rs.Name == "reconcilekit" {
			bars.Values[0], bars.Values[1], bars.Values[3] = secs(res.Converge), secs(res.Takeback), secs(res.Delete)
		}
		cpu.Bars.Series = append(cpu.Bars.Series, bars)
	}
	return []Figure{conv, restart, cpu, HeapFigure(bench, r)}
}

// HeapFigure plots each operator's live heap after GC against N: at
// startup (N = 0) and with the N WebApps of the three-peer run bench, and
// after the restart over the fleet of the scale run scale. Either may be
// nil.
func HeapFigure(bench *Report, scale *ScaleReport) Figure {
	f := Figure{File: "heap.svg", Title: "Heap live after GC against the number of WebApps", Marks: true,
		XLabel: "WebApps", YLabel: "MiB"}
	points := map[string][]XY{}
	var names []string
	add := func(name string, n int, heap int64) {
		if name == "" || heap <= 0 {
			return
		}
		if _, ok := points[name]; !ok {
			names = append(names, name)
		}
		for _, p := range points[name] {
			if p.X == float64(n) {
				return // the first reading of an N wins: the three-peer run's
			}
		}
		points[name] = append(points[name], XY{X: float64(n), Y: float64(heap) / (1 << 20)})
	}
	if bench != nil {
		// The median over the rounds.
		for _, rounds := range bench.columns() {
			heap := func(f func(ImplResult) int64) int64 {
				return int64(over(rounds, func(i ImplResult) float64 { return float64(f(i)) }).Median)
			}
			add(rounds[0].Name, 0, heap(func(i ImplResult) int64 { return i.MemoryStartup.HeapLive }))
			add(rounds[0].Name, bench.Result.Config.N, heap(func(i ImplResult) int64 { return i.Memory.HeapLive }))
		}
	}
	if scale != nil {
		res := scale.Result
		add("reconcilekit", 0, res.MemoryStartup.HeapLive)
		for _, r := range res.Restarts {
			add(r.Name, res.Config.N, r.Memory.HeapLive)
		}
	}
	for _, name := range names {
		ps := points[name]
		slices.SortFunc(ps, func(a, b XY) int { return cmpFloat(a.X, b.X) })
		f.Lines = append(f.Lines, Series{Name: name, Points: ps})
	}
	return f
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// colors gives each operator the same colour in every figure; others
// (the raw client) are black.
var colors = map[string]color.Color{
	"reconcilekit": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"idiomatic":    color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"baseline":     color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// style is the colour and dashes of a series: its operator's colour (the
// name's first word), dashed when the name says more than the operator.
func style(name string) (color.Color, []vg.Length) {
	for op, c := range colors {
		if name == op {
			return c, nil
		}
		if len(name) > len(op) && name[:len(op)] == op {
			return c, []vg.Length{vg.Points(6), vg.Points(3)}
		}
	}
	return color.Black, []vg.Length{vg.Points(2), vg.Points(2)}
}

// Figure sizes: wide enough for the page, text at 11 and 9 points.
const (
	figureWidth  = 7 * vg.Inch
	figureHeight = 3.6 * vg.Inch
)

// SVG renders the figure (gonum.org/v1/plot, fonts not embedded: the
// viewer's sans-serif stands in).
func (f Figure) SVG() ([]byte, error) {
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text, p.Y.Label.Text = f.XLabel, f.YLabel
	for _, t := range []*draw.TextStyle{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.Legend.TextStyle} {
		t.Font.Variant, t.Font.Size = "Sans", vg.Points(11)
	}
	for _, t := range []*draw.TextStyle{&p.X.Tick.Label, &p.Y.Tick.Label} {
		t.Font.Variant, t.Font.Size = "Sans", vg.Points(9)
	}
	p.Y.Min = 0
	// Every curve rises from (0, 0): the legend goes top left.
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(4)
	p.Add(plotter.NewGrid())
	for _, s := range f.Lines {
		if len(s.Points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(s.Points))
		for i, pt := range s.Points {
			xys[i] = plotter.XY{X: pt.X, Y: pt.Y}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", f.File, s.Name, err)
		}
		line.Color, line.Dashes = style(s.Name)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.Name, line)
		if f.Marks {
			marks, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			marks.Color, _ = style(s.Name)
			marks.Shape = draw.CircleGlyph{}
			p.Add(marks)
		}
	}
	if b := f.Bars; b != nil && len(b.Series) > 0 {
		width := vg.Points(60 / float64(len(b.Series)))
		top := 0.0
		for i, s := range b.Series {
			top = max(top, slices.Max(s.Values))
			bars, err := plotter.NewBarChart(plotter.Values(s.Values), width)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", f.File, s.Name, err)
			}
			c, _ := style(s.Name)
			bars.Color, bars.LineStyle.Width = c, 0
			bars.Offset = width * vg.Length(float64(i)-float64(len(b.Series)-1)/2)
			p.Add(bars)
			p.Legend.Add(s.Name, bars)
		}
		p.NominalX(b.Groups...)
		p.X.Min, p.X.Max = -0.5, float64(len(b.Groups))-0.5
		// The legend goes top right, above the bars.
		p.Y.Max = 1.3 * top
		p.Legend.Left, p.Legend.XOffs = false, 0
	}
	c := vgsvg.New(figureWidth, figureHeight)
	// Room on the right for the last tick label, which is centred on
	// the plot's edge.
	p.Draw(draw.Crop(draw.New(c), 0, -vg.Points(16), 0, 0))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
