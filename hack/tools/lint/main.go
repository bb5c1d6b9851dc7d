// Command golangci-lint is golangci-lint with the Kubernetes API linter
// (sigs.k8s.io/kube-api-linter) compiled in as a module plugin named
// "kubeapilinter", and the Kubernetes logging linter (sigs.k8s.io/logtools)
// as "logcheck".
//
// It is what `golangci-lint custom` would generate from a .custom-gcl.yml
// naming the kube-api-linter module: golangci-lint's own main package plus a
// blank import of the plugin, whose init registers it with
// github.com/golangci/plugin-module-register. `golangci-lint custom` clones
// golangci-lint from GitHub to do that; this module builds the same binary from
// the Go module proxy alone, with both versions pinned in go.mod.
//
// hack/tools.sh builds it; `make lint` runs it with .golangci-kal.yml.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// The module plugins: "kubeapilinter" and the analyzers it runs, and
	// "logcheck", which a kubebuilder v4 scaffold's .custom-gcl.yml adds to
	// its golangci-lint (make test-docs runs a scaffold's make lint with
	// this binary).
	_ "sigs.k8s.io/kube-api-linter"
	_ "sigs.k8s.io/logtools/logcheck/gclplugin"
)

func main() {
	if err := commands.Execute(buildInfo()); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "The command is terminated due to an error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}

// buildInfo reports the golangci-lint and kube-api-linter versions this binary
// was built from (read from the module build info, so they cannot drift from
// go.mod).
func buildInfo() commands.BuildInfo {
	info := commands.BuildInfo{Version: "unknown", Commit: "?", Date: "(unknown)", GoVersion: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	var lint, kal string
	for _, dep := range bi.Deps {
		switch dep.Path {
		case "github.com/golangci/golangci-lint/v2":
			lint = dep.Version
		case "sigs.k8s.io/kube-api-linter":
			kal = dep.Version
		}
	}
	if lint != "" {
		info.Version = lint[1:]
	}
	info.Commit = "kube-api-linter " + kal
	return info
}
