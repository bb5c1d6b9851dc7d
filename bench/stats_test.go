package bench

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSpreadOf(t *testing.T) {
	assert.Equal(t, spread{}, spreadOf(nil), "no reading")
	assert.Equal(t, spread{Median: 7, Min: 7, Max: 7, N: 1}, spreadOf([]float64{7}))
	assert.Equal(t, spread{Median: 5, Min: 1, Max: 9, N: 3}, spreadOf([]float64{9, 1, 5}), "the middle one, whatever the order")
	assert.Equal(t, spread{Median: 4, Min: 1, Max: 10, N: 4}, spreadOf([]float64{10, 1, 3, 5}), "even: the mean of the middle two")
	values := []float64{3, 1, 2}
	spreadOf(values)
	assert.Equal(t, []float64{3, 1, 2}, values, "the readings are left in their order")
}

// TestAgainst: a figure is on one side of a line only when its whole range
// is; a range that straddles the line, or overlaps the range of the figure
// the line is drawn from, gets no verdict.
func TestAgainst(t *testing.T) {
	for _, tt := range []struct {
		s, line spread
		want    side
	}{
		{spreadOf([]float64{1, 2, 3}), point(3), atMost},
		{spreadOf([]float64{1, 2, 3}), point(2.5), straddles},
		{spreadOf([]float64{3.1, 4}), point(3), above},
		{spreadOf([]float64{0, 0, 0}), point(0), atMost},
		{spreadOf([]float64{0, 1, 0}), point(0), straddles},
		{spreadOf([]float64{1, 1}), point(0), above},
		// A line drawn from another figure's range: clear of all of it.
		{spreadOf([]float64{8, 9}), spreadOf([]float64{9, 12}), atMost},
		{spreadOf([]float64{8, 10}), spreadOf([]float64{9, 12}), straddles},
		{spreadOf([]float64{13, 20}), spreadOf([]float64{9, 12}), above},
		{spreadOf([]float64{11, 12}), spreadOf([]float64{9, 12}), straddles}, // medians 11.5 and 10.5: still no verdict
	} {
		assert.Equal(t, tt.want, tt.s.against(tt.line), "%+v against %+v", tt.s, tt.line)
	}
	assert.Equal(t, spread{Median: 2, Min: 1, Max: 3, N: 2}, spread{Median: 1, Min: 0.5, Max: 1.5, N: 2}.scaled(2))
}

func TestGoalVerdict(t *testing.T) {
	assert.Equal(t, "PASS", goalVerdict(atMost))
	assert.Equal(t, "BEHIND", goalVerdict(above))
	assert.Equal(t, "within noise", goalVerdict(straddles))
}

func TestSpreadCell(t *testing.T) {
	f := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	assert.Equal(t, "—", spread{}.cell(f), "not measured")
	assert.Equal(t, "2.0", spreadOf([]float64{2, 2, 2}).cell(f), "readings that agree: one figure")
	assert.Equal(t, "2.0 (1.0–4.0)", spreadOf([]float64{4, 1, 2}).cell(f), "the median and the range")
	assert.Equal(t, "2.0", spreadOf([]float64{2.01, 1.99, 2}).cell(f), "readings that differ below what is shown: one figure")
}
