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

// The WebApp operator (the package variable operator) is installed and
// started after the cluster, by its Stage, and stopped before the cluster
// is deleted.

// TestMain creates the cluster picked by E2E_PROVIDER, installs and starts
// the WebApp operator (E2E_OPERATOR), runs the tests, stops the operator and
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
	if operator, err = newWebappOperator(harness); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	testenv = env.NewWithConfig(cfg)
	return harness.Run(m, testenv, operator.stage())
}
