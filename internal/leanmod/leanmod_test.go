package leanmod

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the library module's directory, relative to this package.
const repoRoot = "../.."

// outerOnly are modules that only code outside the library needs. The root
// go.mod must not require them at all, not even as an indirect dependency.
var outerOnly = map[string]string{
	"sigs.k8s.io/e2e-framework":     "e2e/ (its test framework)",
	"k8s.io/pod-security-admission": "examples/webapp (its tests check pod security)",
	"k8s.io/apiserver":              "bench/ (its request counter)",
}

// notDirect are modules the library's packages must not import. They may
// stay in the root go.mod as indirect requirements, because a dependency's
// package needs them (client_golang's metrics, controller-runtime's zap logger
// in a webhookkit test), but a direct requirement means library code or a
// library test imports what only examples/, bench/ or e2e/ should.
var notDirect = map[string]string{
	"go.uber.org/zap":                    "the example operator's and bench's logging (controller-runtime's log/zap)",
	"github.com/prometheus/client_model": "bench/ (metrics scraping)",
	"github.com/prometheus/common":       "bench/ (metrics scraping)",
}

// goCommand runs go in the library module, outside any go.work (a local
// go.work would join the nested modules' requirements to the library's).
func goCommand(t *testing.T, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.Bytes(), errb.Bytes(), err
}

// TestGoModIsTidy fails when `go mod tidy` would change the root go.mod or
// go.sum: a requirement no library package or test imports any more (say,
// left behind when code moved to a nested module), or one that is missing.
// With a cold module cache it downloads, like any go build.
func TestGoModIsTidy(t *testing.T) {
	abs, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	stdout, stderr, err := goCommand(t, "mod", "tidy", "-diff")
	if err != nil {
		t.Fatalf("the library's go.mod is not tidy (%v); run `go mod tidy` in %s. The difference:\n%s%s", err, abs, stdout, stderr)
	}
}

// TestGoModIsLean fails when the root go.mod requires a module that only the
// nested modules (examples/, e2e/, bench/, docs/) need.
func TestGoModIsLean(t *testing.T) {
	stdout, stderr, err := goCommand(t, "mod", "edit", "-json")
	require.NoError(t, err, "go mod edit -json: %s", stderr)
	var mod struct {
		Module  struct{ Path string }
		Require []struct {
			Path     string
			Indirect bool
		}
	}
	require.NoError(t, json.Unmarshal(stdout, &mod))
	require.Equal(t, "github.com/reconcilekit/reconcilekit", mod.Module.Path, "not the library's go.mod")
	require.NotEmpty(t, mod.Require)
	for _, r := range mod.Require {
		if why, ok := outerOnly[r.Path]; ok {
			t.Errorf("the library's go.mod requires %s, which only %s needs; keep that code, and the requirement, in its nested module", r.Path, why)
		}
		if why, ok := notDirect[r.Path]; ok && !r.Indirect {
			t.Errorf("the library's go.mod requires %s directly, which only %s should import; `go mod why -m %s` names the importer", r.Path, why, r.Path)
		}
	}
}

// TestNestedModulesStayOut fails when a directory that should be a module of
// its own has lost its go.mod: its packages would silently join the library
// module, and its dependencies the library's go.mod.
func TestNestedModulesStayOut(t *testing.T) {
	for _, dir := range []string{"examples", "e2e", "bench", "docs", filepath.Join("hack", "tools")} {
		_, err := os.Stat(filepath.Join(repoRoot, dir, "go.mod"))
		assert.NoError(t, err, "%s/go.mod", dir)
	}
}

// initHeapLimit bounds the heap each library package allocates before main:
// every operator that imports the package pays it for its whole life.
const initHeapLimit = 32 << 10

// TestLibraryInitAllocatesLittle builds a program importing every library
// package and reads the runtime's trace of package initialisation
// (GODEBUG=inittrace=1): a package-level regexp with a bounded repetition,
// a table built eagerly, show up here (webhookkit's image tag pattern held
// 130 KiB).
func TestLibraryInitAllocatesLittle(t *testing.T) {
	stdout, stderr, err := goCommand(t, "list", "./...")
	require.NoError(t, err, "go list: %s", stderr)
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range strings.Fields(string(stdout)) {
		if !strings.Contains(p, "/internal/") {
			fmt.Fprintf(&src, "\t_ %q\n", p)
		}
	}
	src.WriteString(")\n\nfunc main() {}\n")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644))
	bin := filepath.Join(dir, "probe")
	_, stderr, err = goCommand(t, "build", "-o", bin, filepath.Join(dir, "main.go"))
	require.NoError(t, err, "building the probe: %s", stderr)

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	trace, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", trace)
	// init github.com/reconcilekit/reconcilekit/webhookkit @98 ms, 0.082 ms clock, 16416 bytes, 197 allocs
	line := regexp.MustCompile(`(?m)^init (github\.com/reconcilekit/reconcilekit/\S+) @.*, (\d+) bytes,`)
	found := line.FindAllStringSubmatch(string(trace), -1)
	require.NotEmpty(t, found, "no library package in the init trace:\n%s", trace)
	for _, m := range found {
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		assert.LessOrEqual(t, n, initHeapLimit, "%s allocates %d bytes at init; make its package-level state lazy or smaller", m[1], n)
	}
}
