package apicheck_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAPICheck runs hack/apicheck.sh on a module of two exported functions:
// no snapshot fails, the snapshot it writes passes, an addition passes, a
// removed exported name fails with a message naming it (and not the
// addition) and saying how to proceed, and a rewritten snapshot passes.
func TestAPICheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds apidiff and type-checks a module")
	}
	module := t.TempDir()
	snapshot := filepath.Join(t.TempDir(), "api.export")
	write(t, filepath.Join(module, "go.mod"), "module example.com/fixture\n\ngo 1.26.0\n")
	source := filepath.Join(module, "p", "p.go")
	write(t, source, "// Package p is the fixture.\npackage p\n\n// A is kept.\nfunc A() {}\n\n// B is removed.\nfunc B() {}\n")

	run := func(arg string) (string, error) {
		t.Helper()
		cmd := exec.Command("bash", filepath.Join("..", "..", "hack", "apicheck.sh"), arg)
		cmd.Env = append(os.Environ(), "APICHECK_MODULE_DIR="+module, "APICHECK_SNAPSHOT="+snapshot)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mustPass := func(step, arg string) {
		t.Helper()
		if out, err := run(arg); err != nil {
			t.Fatalf("%s: apicheck.sh %s failed: %v\n%s", step, arg, err, out)
		}
	}

	if out, err := run("check"); err == nil || !strings.Contains(out, "no API snapshot") {
		t.Fatalf("without a snapshot: want a failure saying there is none, got err=%v:\n%s", err, out)
	}
	mustPass("snapshot written", "write")
	mustPass("unchanged API", "check")

	write(t, source, "// Package p is the fixture.\npackage p\n\n// A is kept.\nfunc A() {}\n\n// B is removed.\nfunc B() {}\n\n// C is added.\nfunc C() {}\n")
	mustPass("an added name", "check")

	write(t, source, "// Package p is the fixture.\npackage p\n\n// A is kept.\nfunc A() {}\n\n// C is added.\nfunc C() {}\n")
	out, err := run("check")
	if err == nil {
		t.Fatalf("a removed exported name passed the check:\n%s", out)
	}
	for _, want := range []string{"p.B: removed", "make api-snapshot", "CHANGELOG.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "p.C") {
		t.Errorf("the failure lists the addition of p.C among the incompatible changes:\n%s", out)
	}

	mustPass("snapshot rewritten", "write")
	mustPass("the new API", "check")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
