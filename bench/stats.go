package bench

import "slices"

// spread is one figure over the rounds of a run: its median and the range
// of its readings. A report judges a figure only when the spreads it
// compares lie clear of the line (against).
type spread struct {
	Median, Min, Max float64
	// N is the number of readings (0: none).
	N int
}

// spreadOf is the spread of values: the median (the mean of the middle
// two of an even number) and the range.
func spreadOf(values []float64) spread {
	if len(values) == 0 {
		return spread{}
	}
	v := slices.Sorted(slices.Values(values))
	n := len(v)
	median := v[n/2]
	if n%2 == 0 {
		median = (v[n/2-1] + v[n/2]) / 2
	}
	return spread{Median: median, Min: v[0], Max: v[n-1], N: n}
}

// over is the spread of f over rounds.
func over(rounds []ImplResult, f func(ImplResult) float64) spread {
	values := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		values = append(values, f(r))
	}
	return spreadOf(values)
}

// scaled is s times k: a line drawn k times another figure.
func (s spread) scaled(k float64) spread {
	return spread{Median: s.Median * k, Min: s.Min * k, Max: s.Max * k, N: s.N}
}

// point is a spread of one exact value: a fixed line.
func point(v float64) spread { return spread{Median: v, Min: v, Max: v, N: 1} }

// side is where a figure's spread lies against a line's.
type side int

const (
	// straddles: the spreads overlap, so the rounds disagree about the
	// side: within noise, no verdict.
	straddles side = iota
	// atMost: every reading is at most the line, at its lowest.
	atMost
	// above: every reading is above the line, at its highest.
	above
)

// against says on which side of line s lies. A line drawn from another
// figure (scaled) has that figure's spread: s is atMost it only when its
// highest reading is at most the line's lowest, and above only when its
// lowest is above the line's highest.
func (s spread) against(line spread) side {
	switch {
	case s.Max <= line.Min:
		return atMost
	case s.Min > line.Max:
		return above
	}
	return straddles
}

// cell renders s with render: the median, and the range in parentheses
// when the readings differ as rendered.
func (s spread) cell(render func(float64) string) string {
	if s.N == 0 {
		return "—"
	}
	lo, hi := render(s.Min), render(s.Max)
	if lo == hi {
		return render(s.Median)
	}
	return render(s.Median) + " (" + lo + "–" + hi + ")"
}

// goalVerdict is the verdict of a goal "figure ≤ line" on the side the
// figure lies: PASS, BEHIND, or within noise when the rounds disagree.
func goalVerdict(side side) string {
	switch side {
	case atMost:
		return "PASS"
	case above:
		return "BEHIND"
	}
	return "within noise"
}
