//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The Grafana dashboard drawn without Grafana: each panel at its grid
// place, each query's series over the run as lines (a stat panel: its last
// value), from the Prometheus that scraped the operator. Grafana is a
// browser app; the picture in docs/ only has to show what the queries
// returned, so this draws it with the standard library and x/image's
// fixed font.

// dashboardPanel is what the picture needs of a panel.
type dashboardPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// series is one line of a panel.
type series struct {
	legend string
	points [][2]float64 // unix seconds, value
}

// queryRange runs expr over [from, to] every step.
func (p *prometheusServer) queryRange(ctx context.Context, expr string, from, to time.Time, step time.Duration) ([]series, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	q := url.Values{"query": {expr}, "start": {strconv.FormatInt(from.Unix(), 10)}, "end": {strconv.FormatInt(to.Unix(), 10)},
		"step": {strconv.Itoa(int(step.Seconds()))}}
	if err := p.api(ctx, "query_range", q, &data); err != nil {
		return nil, err
	}
	var out []series
	for _, r := range data.Result {
		s := series{legend: labelString(r.Metric)}
		for _, v := range r.Values {
			t, _ := v[0].(float64)
			str, _ := v[1].(string)
			if f, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				s.points = append(s.points, [2]float64{t, f})
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func labelString(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

var legendVarRE = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// legendOf fills a Grafana legend format ("wake-ups skipped: {{cause}}").
func legendOf(format string, s series) string {
	if format == "" {
		return s.legend
	}
	labels := map[string]string{}
	for _, kv := range strings.Fields(s.legend) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			labels[k] = v
		}
	}
	return legendVarRE.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendVarRE.FindStringSubmatch(m)[1]]
	})
}

// renderDashboard draws the dashboard in dashboardJSON from prom's data
// over [from, to] to path as a PNG.
func renderDashboard(ctx context.Context, prom *prometheusServer, dashboardJSON []byte, from, to time.Time, path string) error {
	var d struct {
		Title  string           `json:"title"`
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return fmt.Errorf("the dashboard: %w", err)
	}
	const colW, rowH, top = 56, 28, 28
	rows := 0
	for _, p := range d.Panels {
		rows = max(rows, p.GridPos.Y+p.GridPos.H)
	}
	img := image.NewRGBA(image.Rect(0, 0, 24*colW, top+rows*rowH))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.RGBA{0x18, 0x1b, 0x1f, 0xff}), image.Point{}, draw.Src)
	text(img, 8, 18, fmt.Sprintf("%s, %s to %s (drawn by the alert e2e from its Prometheus)", d.Title,
		from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05 MST")), color.White)
	step := max(time.Second, to.Sub(from)/200)
	for _, p := range d.Panels {
		r := image.Rect(p.GridPos.X*colW+4, top+p.GridPos.Y*rowH+4, (p.GridPos.X+p.GridPos.W)*colW-4, top+(p.GridPos.Y+p.GridPos.H)*rowH-4)
		var lines []series
		for _, tg := range p.Targets {
			ss, err := prom.queryRange(ctx, strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m"), from, to, step)
			if err != nil {
				return fmt.Errorf("panel %q: %w", p.Title, err)
			}
			for _, s := range ss {
				s.legend = legendOf(tg.LegendFormat, s)
				lines = append(lines, s)
			}
		}
		drawPanel(img, r, p, lines, from, to)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

var palette = []color.RGBA{{0x73, 0xbf, 0x69, 0xff}, {0xf2, 0xcc, 0x0c, 0xff}, {0x8a, 0xb8, 0xff, 0xff}, {0xff, 0x78, 0x0a, 0xff},
	{0xf2, 0x49, 0x5c, 0xff}, {0x56, 0x94, 0xf2, 0xff}, {0xb8, 0x77, 0xd9, 0xff}, {0x96, 0xd9, 0x8d, 0xff}}

func drawPanel(img *image.RGBA, r image.Rectangle, p dashboardPanel, lines []series, from, to time.Time) {
	draw.Draw(img, r, image.NewUniform(color.RGBA{0x22, 0x25, 0x2b, 0xff}), image.Point{}, draw.Src)
	text(img, r.Min.X+6, r.Min.Y+14, p.Title, color.White)
	grey := color.RGBA{0x9f, 0xa7, 0xb3, 0xff}
	if p.Type == "stat" {
		v := "no data"
		if len(lines) > 0 && len(lines[0].points) > 0 {
			v = strconv.FormatFloat(lines[0].points[len(lines[0].points)-1][1], 'g', 4, 64)
		}
		text(img, r.Min.X+6, r.Max.Y-10, v, palette[0])
		return
	}
	legendRows := min(len(lines), 3)
	plot := image.Rect(r.Min.X+48, r.Min.Y+22, r.Max.X-8, r.Max.Y-8-14*legendRows)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range lines {
		for _, pt := range s.points {
			lo, hi = math.Min(lo, pt[1]), math.Max(hi, pt[1])
		}
	}
	if math.IsInf(lo, 0) {
		text(img, plot.Min.X, plot.Min.Y+14, "no data", grey)
		return
	}
	lo = math.Min(lo, 0)
	if hi <= lo {
		hi = lo + 1
	}
	for x := plot.Min.X; x < plot.Max.X; x++ {
		img.Set(x, plot.Max.Y, grey)
	}
	text(img, r.Min.X+4, plot.Min.Y+8, strconv.FormatFloat(hi, 'g', 3, 64), grey)
	text(img, r.Min.X+4, plot.Max.Y, strconv.FormatFloat(lo, 'g', 3, 64), grey)
	span := to.Sub(from).Seconds()
	for i, s := range lines {
		c := palette[i%len(palette)]
		var prev image.Point
		for j, pt := range s.points {
			q := image.Pt(plot.Min.X+int(float64(plot.Dx())*(pt[0]-float64(from.Unix()))/span),
				plot.Max.Y-int(float64(plot.Dy())*(pt[1]-lo)/(hi-lo)))
			if j > 0 {
				line(img, prev, q, c)
			}
			prev = q
		}
		if i < legendRows {
			legend := s.legend
			if i == legendRows-1 && len(lines) > legendRows {
				legend += fmt.Sprintf(" (+%d more)", len(lines)-legendRows)
			}
			text(img, plot.Min.X, plot.Max.Y+14*(i+1), "- "+legend, c)
		}
	}
}

// line draws a straight line from a to b (Bresenham).
func line(img *image.RGBA, a, b image.Point, c color.Color) {
	dx, dy := abs(b.X-a.X), -abs(b.Y-a.Y)
	sx, sy := sign(b.X-a.X), sign(b.Y-a.Y)
	e := dx + dy
	for {
		img.Set(a.X, a.Y, c)
		if a == b {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			a.X += sx
		}
		if e2 <= dx {
			e += dx
			a.Y += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
