package leanmod

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
