package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDocwalkStopsWhatThePageStarted: a page that starts a process in the
// background inside a subshell (`build && run &`: the job is the subshell,
// the process its child) leaves nothing running once the walk ends, pass
// or fail. The walk used to kill its jobs only, and a page's operator
// outlived it, holding its port for the next walk.
func TestDocwalkStopsWhatThePageStarted(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid (util-linux)")
	}
	// A sleep no other process runs: its argument is unique to this test.
	// Its output goes elsewhere, so that a leak fails the test rather than
	// holding the walk's output open.
	marker := fmt.Sprintf("%d.%03d", 900+os.Getpid()%97, time.Now().Nanosecond()/1e6)
	for _, tc := range []struct {
		name, last string
		pass       bool
	}{{"pass", "true", true}, {"fail", "false", false}} {
		t.Run(tc.name, func(t *testing.T) {
			page := filepath.Join(t.TempDir(), "page.md")
			require.NoError(t, os.WriteFile(page, []byte("# A page\n\n```sh\ntrue && sleep "+marker+" >/dev/null 2>&1 &\n"+tc.last+"\n```\n"), 0o644))
			cmd := exec.Command("bash", filepath.Join(repoRoot, "hack", "docwalk.sh"), page)
			out, err := cmd.CombinedOutput()
			if tc.pass {
				require.NoError(t, err, "%s", out)
			} else {
				require.Error(t, err, "%s", out)
				// The failing walk keeps its directory; remove it.
				for _, line := range strings.Split(string(out), "\n") {
					if _, rest, ok := strings.Cut(line, "the walk is kept in "); ok {
						dir, _, _ := strings.Cut(rest, " ")
						_ = os.RemoveAll(dir)
					}
				}
			}
			left, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output()
			if pids := strings.Fields(string(left)); len(pids) > 0 {
				_ = exec.Command("pkill", "-f", "sleep "+marker).Run()
				t.Fatalf("the page's background process outlived the walk: pids %v", pids)
			}
		})
	}
}
