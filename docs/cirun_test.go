package docs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCIRunLeavesNothingRunning runs a copy of .ci/run in a scratch checkout
// whose make and hack scripts only record what they are asked, so no real
// cluster or engine is touched. Whether make test passes, fails or is stopped
// by SIGTERM (a CI runner's timeout), .ci/run exits with make test's status
// (143 when stopped) after deleting every cluster a test could have left and
// stopping the engine; when stopped, every process of the run gets the signal
// and has finished its teardown before the clusters are deleted. .ci/run used
// to run only its cleanup on SIGTERM, leaving make test running behind it.
func TestCIRunLeavesNothingRunning(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	require.NoError(t, err)
	// A sleep no other process runs: its argument is unique to this test.
	marker := fmt.Sprintf("%d.%03d", 800+os.Getpid()%97, time.Now().Nanosecond()/1e6)
	cleanups := []string{
		"cluster.sh down reconcilekit",
		"cluster.sh down reconcilekit-e2e",
		"cluster.sh down reconcilekit-e2e-bundle",
		"kind.sh down reconcilekit-kind-e2e",
		"kind.sh down reconcilekit-kind",
		"engine.sh down",
	}
	for _, tc := range []struct {
		name, make string
		stop       bool
		wantStatus int
		wantLog    []string
	}{
		{name: "make test passes", make: "pass", wantStatus: 0, wantLog: []string{"make test"}},
		{name: "make test fails", make: "fail", wantStatus: 2, wantLog: []string{"make test"}},
		{
			name: "stopped by SIGTERM", make: "hang", stop: true, wantStatus: 143,
			wantLog: []string{"make test", "test started", "test torn down"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "calls.log")
			writeStubCheckout(t, dir, script)
			cmd := exec.Command("bash", filepath.Join(dir, ".ci", "run"))
			cmd.Env = append(os.Environ(),
				"PATH="+filepath.Join(dir, "stubs")+":"+os.Getenv("PATH"),
				"CIRUN_LOG="+log, "CIRUN_MAKE="+tc.make, "CIRUN_MARKER="+marker)
			// Output to a file, not a pipe: a process .ci/run leaves behind
			// would hold a pipe open and keep Wait from returning.
			out, err := os.Create(filepath.Join(dir, "output"))
			require.NoError(t, err)
			defer out.Close()
			cmd.Stdout, cmd.Stderr = out, out
			require.NoError(t, cmd.Start())
			if tc.stop {
				require.Eventually(t, func() bool {
					calls, _ := os.ReadFile(log)
					return strings.Contains(string(calls), "test started")
				}, 30*time.Second, 50*time.Millisecond, "the stub make test never started")
				require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			}
			err = cmd.Wait()
			output, _ := os.ReadFile(out.Name())
			status := 0
			if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
				status = exit.ExitCode()
			} else {
				require.NoError(t, err, "%s", output)
			}
			assert.Equal(t, tc.wantStatus, status, "%s", output)
			calls, err := os.ReadFile(log)
			require.NoError(t, err)
			assert.Equal(t, append(tc.wantLog, cleanups...), strings.Split(strings.TrimSpace(string(calls)), "\n"),
				"what .ci/run did, in order")
			if left, _ := exec.Command("pgrep", "-f", "sleep "+marker).Output(); len(left) > 0 {
				_ = exec.Command("pkill", "-f", "sleep "+marker).Run()
				t.Fatalf("a process of make test outlived .ci/run: pids %s", left)
			}
		})
	}
}

// writeStubCheckout writes .ci/run (script) into dir, and stubs that append
// each call to $CIRUN_LOG: make on dir/stubs (its behaviour set by
// $CIRUN_MAKE) and the hack scripts .ci/run's cleanup calls.
func writeStubCheckout(t *testing.T, dir string, script []byte) {
	t.Helper()
	files := map[string]string{
		".ci/run": string(script),
		"stubs/make": `echo "make $*" >>"$CIRUN_LOG"
case $CIRUN_MAKE in
pass) exit 0 ;;
fail) exit 2 ;;
esac
# A process that knows nothing of signals, and a test that tears down on
# SIGTERM, taking its time, as the e2e suites do (a minute at most, should
# nothing stop it).
sleep "$CIRUN_MARKER" &
bash -c 'trap "sleep 0.5; echo test torn down >>\"\$CIRUN_LOG\"; exit 130" TERM
echo test started >>"$CIRUN_LOG"
for i in $(seq 600); do sleep 0.1; done' &
wait
`,
		"hack/tools.sh":   `[[ "$1" == --dir ]] && echo "$PWD/no-tools"`,
		"hack/cluster.sh": `echo "cluster.sh $* $CLUSTER_NAME" >>"$CIRUN_LOG"`,
		"hack/kind.sh":    `echo "kind.sh $* $KIND_CLUSTER_NAME" >>"$CIRUN_LOG"`,
		"hack/engine.sh":  `echo "engine.sh $*" >>"$CIRUN_LOG"`,
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		if !strings.HasPrefix(body, "#!") {
			body = "#!/usr/bin/env bash\n" + body
		}
		require.NoError(t, os.WriteFile(path, []byte(body), 0o755))
	}
}
