package prereq

import (
	"testing"
)

// recorder is a testing.TB that records how Missing ended the test.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Skipf(string, ...any)  { r.skipped = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestMissing(t *testing.T) {
	for _, tt := range []struct {
		ci                    string
		wantSkip, wantFailure bool
	}{
		{ci: "", wantSkip: true},
		{ci: "false", wantSkip: true},
		{ci: "not-a-bool", wantSkip: true},
		{ci: "true", wantFailure: true},
		{ci: "1", wantFailure: true},
	} {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			r := &recorder{TB: t}
			Missing(r, "promtool is not installed")
			if r.skipped != tt.wantSkip || r.failed != tt.wantFailure {
				t.Errorf("CI=%q: skipped=%v failed=%v, want skipped=%v failed=%v", tt.ci, r.skipped, r.failed, tt.wantSkip, tt.wantFailure)
			}
		})
	}
}
