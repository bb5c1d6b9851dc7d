package bench

import (
	"math"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseStatCPU: utime and stime are fields 14 and 15, counted after
// the command name's last ')', whatever the name holds.
func TestParseStatCPU(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime ...
	line := "4242 (my op) (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 9 9 20 0 12 0 100 0 0\n"
	got, err := parseStatCPU(line)
	require.NoError(t, err)
	assert.Equal(t, 3250*time.Millisecond, got, "(250+75) ticks of 10ms; children's cutime/cstime left out")

	_, err = parseStatCPU("4242 (short) S 1 2 3")
	assert.Error(t, err)
	_, err = parseStatCPU("no parenthesis")
	assert.Error(t, err)
}

// TestProcessCPU reads this test process's CPU time: it agrees with
// getrusage(RUSAGE_SELF) to within a few 10ms ticks, and grows while the
// process burns CPU.
func TestProcessCPU(t *testing.T) {
	rusage := func() time.Duration {
		var ru syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := ProcessCPU(os.Getpid())
	require.NoError(t, err)
	x := 0.0
	for deadline := time.Now().Add(10 * time.Second); rusage()-before < 200*time.Millisecond && time.Now().Before(deadline); {
		for range 100000 {
			x += math.Sqrt(x + 1)
		}
	}
	got, err := ProcessCPU(os.Getpid())
	require.NoError(t, err)
	want := rusage()
	assert.InDelta(t, want.Seconds(), got.Seconds(), 0.05, "/proc against getrusage (x=%g)", x)
	assert.Greater(t, got, before)
	_, err = ProcessCPU(math.MaxInt32)
	assert.Error(t, err, "no such process")
}

// TestHistogramQuantile interpolates inside buckets as histogram_quantile
// does.
func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	h := Histogram{Bounds: []float64{0.01, 0.1, 1, inf}, Counts: []float64{50, 90, 100, 100}}
	assert.InDelta(t, 0.01, h.Quantile(0.5), 1e-9)
	assert.InDelta(t, 0.01+0.09*0.5, h.Quantile(0.7), 1e-9)
	assert.InDelta(t, 0.1+0.9*0.9, h.Quantile(0.99), 1e-9)
	before := Histogram{Bounds: h.Bounds, Counts: []float64{50, 50, 50, 50}}
	d := h.Sub(before)
	assert.Equal(t, 50.0, d.Count())
	assert.InDelta(t, 0.01+0.09*(25.0/40), d.Quantile(0.5), 1e-9)
	assert.True(t, math.IsNaN(Histogram{}.Quantile(0.5)))
	// All in +Inf: the highest finite bound.
	assert.Equal(t, 1.0, Histogram{Bounds: h.Bounds, Counts: []float64{0, 0, 0, 3}}.Quantile(0.5))
}

func TestProfiledGODEBUG(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "memprofilerate=4096",
		"gctrace=1":              "gctrace=1,memprofilerate=4096",
		"memprofilerate=1":       "memprofilerate=1",
		"x=1,memprofilerate=512": "x=1,memprofilerate=512",
	} {
		if got := profiledGODEBUG(in); got != want {
			t.Errorf("profiledGODEBUG(%q) = %q, want %q", in, got, want)
		}
	}
}
