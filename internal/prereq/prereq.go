// Package prereq decides what a test does when something it needs is
// missing: a tool, a server or an API that the project's own scripts
// (hack/tools.sh, hack/prometheus.sh, hack/cluster.sh) are meant to provide.
// On a developer's machine the test skips and says why; in continuous
// integration (CI=true) it fails, so a broken install step cannot turn a
// test into a silent skip.
package prereq

import (
	"os"
	"strconv"
	"testing"
)

// InCI reports whether the environment variable CI is set to a true value
// ("true", "1", ...), as CI services set it.
func InCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// Missing ends t because a prerequisite the project's scripts install is
// not there: t.Skipf with the reason outside CI, t.Fatalf under CI=true.
// Use it only for such prerequisites; a test that does not apply to the
// configuration at hand (-short, another E2E_PROVIDER) skips with t.Skip.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true, and the project's scripts install this prerequisite, so its absence fails the test: "+format, args...)
		return
	}
	t.Skipf(format, args...)
}
