package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOperatorDoesNotLinkTheAPIServerLibrary: k8s.io/apiserver (through
// controller-runtime's metrics filters, say) would add about 250 packages,
// 28 MiB of binary and 1.6 MiB of heap held from init on; the metrics are
// protected by metricsauth instead.
func TestOperatorDoesNotLinkTheAPIServerLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var linked []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "k8s.io/apiserver/") {
			linked = append(linked, p)
		}
	}
	require.Empty(t, linked, "the operator links k8s.io/apiserver; `go list -deps` and `go mod why` name the importer")
}
