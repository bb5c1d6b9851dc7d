// apidiff, built from the Go module proxy by hack/tools.sh (build_keyed_tool:
// rebuilt when this go.sum changes, without changing the control plane's
// cache key). A module of its own so that hack/tools/go.sum stays as it is;
// the tool directive below is what it builds. hack/apicheck.sh runs it.
module github.com/reconcilekit/reconcilekit/hack/apidifftool

go 1.26.0

tool golang.org/x/exp/cmd/apidiff

require (
	golang.org/x/exp v0.0.0-20261120182113-8801fbdfac81 // indirect
	golang.org/x/mod v0.43.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/tools v0.53.0 // indirect
)
