//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

var (
	// testenv runs the features of this package: testenv.Test(t, feature).
	testenv env.Environment
	// harness owns the suite's cluster; use harness.Kubectl for kubectl.
	harness *Harness
)

// TestMain creates the cluster picked by E2E_PROVIDER, runs the tests and
// deletes the cluster; see doc.go. e2e-framework's flags (-args -feature,
// -assess, -labels, ...) select what runs.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	opts, err := OptionsFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	harness, err = NewHarness(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	cfg, err := envconf.NewFromFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	testenv = env.NewWithConfig(cfg)
	return harness.Run(m, testenv)
}
