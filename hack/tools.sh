#!/usr/bin/env bash
# Builds the test toolchain from source into a cache outside the checkout and
# prints the bin directory on its last line.
#
# Nothing here downloads a prebuilt binary: the control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) is compiled
# from the Go module proxy by the tools module in hack/tools, and kwok,
# kwokctl, controller-gen and golangci-lint are `go install`ed from their own
# modules. A binary that is already in the cache is never rebuilt, so a second
# run returns in seconds; the cache key is the set of versions below plus a
# hash of hack/tools/go.sum, so changing a pin builds into a fresh directory.
#
# golangci-lint-kal is golangci-lint with the Kubernetes API linter
# (sigs.k8s.io/kube-api-linter) compiled in as a module plugin, built from the
# small module in hack/tools/lint (what `golangci-lint custom` generates, without
# its git clone). It is keyed on its own: a stamp next to the binary records a
# hash of hack/tools/lint/go.sum, and a different hash rebuilds that binary only
# (about a minute), never the control plane. helm is built the same way from
# hack/helmtool, metrics-server from hack/metricsserver and apidiff from
# hack/apidifftool.
#
# Usage: hack/tools.sh          build what is missing, print the bin directory
#        hack/tools.sh --dir    print the bin directory, build nothing
#
# Environment:
#   RECONCILEKIT_CACHE  cache root (default: $HOME/.cache/reconcilekit)
#   TOOLS_ONLY          space-separated subset of tools to build (default: all)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

K8S_VERSION=v1.37.2
KWOK_VERSION=v0.8.0
CONTROLLER_TOOLS_VERSION=v0.23.0
GOLANGCI_LINT_VERSION=v2.15.0

sum=$(sha256sum "$here/tools/go.sum" | cut -c1-12)
cache_root=${RECONCILEKIT_CACHE:-$HOME/.cache/reconcilekit}
bin="$cache_root/k8s-$K8S_VERSION-kwok-$KWOK_VERSION-cg-$CONTROLLER_TOOLS_VERSION-lint-$GOLANGCI_LINT_VERSION-$sum/bin"
if [[ "${1:-}" == "--dir" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$bin"

say() { echo "tools: $*" >&2; }

# One build at a time per cache (make test's two chains both need the tools):
# a second caller waits, then finds everything built.
exec 9>"$bin/.build.lock"
flock 9

# Build outside any user GOFLAGS that would make these builds differ.
export GOFLAGS=-buildvcs=false CGO_ENABLED=0

want() {
	local name=$1
	if [[ -n "${TOOLS_ONLY:-}" && " $TOOLS_ONLY " != *" $name "* ]]; then
		return 1
	fi
	[[ -x "$bin/$name" ]] && return 1
	return 0
}

announced=
announce() {
	if [[ -z "$announced" ]]; then
		say "building the test toolchain from source into $bin"
		say "a cold build takes about ten minutes on two cores; later runs reuse the cache"
		announced=1
	fi
	say "building $1"
}

# build_tool NAME PACKAGE [LDFLAGS]: go build PACKAGE from the tools module.
build_tool() {
	local name=$1 pkg=$2 ldflags=${3:-}
	want "$name" || return 0
	announce "$name ($pkg)"
	(cd "$here/tools" && go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/$name.tmp" "$pkg")
	mv "$bin/$name.tmp" "$bin/$name"
}

# build_keyed_tool NAME MODULE_DIR PACKAGE [LDFLAGS]: go build PACKAGE from its
# own small module in MODULE_DIR, rebuilt whenever MODULE_DIR/go.sum changes
# (the hash is kept in $bin/.NAME.sum) without changing the bin directory.
build_keyed_tool() {
	local name=$1 dir=$2 pkg=$3 ldflags=${4:-}
	local key stamp="$bin/.$name.sum"
	key=$(sha256sum "$dir/go.sum" | cut -c1-12)
	if [[ -x "$bin/$name" && "$(cat "$stamp" 2>/dev/null)" == "$key" ]]; then
		return 0
	fi
	[[ -n "${TOOLS_ONLY:-}" && " $TOOLS_ONLY " != *" $name "* ]] && return 0
	announce "$name ($dir, go.sum $key)"
	(cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/$name.tmp" "$pkg")
	mv "$bin/$name.tmp" "$bin/$name"
	echo "$key" >"$stamp"
}

# install_tool NAME MODULE/PATH@VERSION: go install from the tool's own module.
install_tool() {
	local name=$1 ref=$2
	want "$name" || return 0
	announce "$name ($ref)"
	local tmp
	tmp=$(mktemp -d)
	GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "$ref"
	mv "$tmp/$name" "$bin/$name"
	rm -rf "$tmp"
}

major=${K8S_VERSION#v}
major=${major%%.*}
minor=${K8S_VERSION#v*.}
minor=${minor%%.*}
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	k8s_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build_tool etcd go.etcd.io/etcd/server/v3
build_tool kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build_tool kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build_tool kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
build_tool kubectl k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
install_tool kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
install_tool kwokctl "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
install_tool controller-gen "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION"
install_tool golangci-lint "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
# The API linter's golangci-lint must be the same release as the one above.
if ! grep -q "github.com/golangci/golangci-lint/v2 $GOLANGCI_LINT_VERSION\$" "$here/tools/lint/go.mod"; then
	say "error: hack/tools/lint/go.mod does not pin github.com/golangci/golangci-lint/v2 $GOLANGCI_LINT_VERSION"
	exit 1
fi
build_keyed_tool golangci-lint-kal "$here/tools/lint" .
# helm, for `make helm-*` and docs/deploying.md (the chart's tests use Helm's
# Go library in packaging/ instead). Keyed on hack/helmtool/go.sum; its
# version is the one that module pins.
helm_version=$(awk '$1 == "helm.sh/helm/v4" {print $2} $1 == "require" && $2 == "helm.sh/helm/v4" {print $3}' "$here/helmtool/go.mod")
build_keyed_tool helm "$here/helmtool" helm.sh/helm/v4/cmd/helm "-X helm.sh/helm/v4/internal/version.version=$helm_version"

# apidiff, for the API compatibility check in make lint (hack/apicheck.sh).
# Keyed on hack/apidifftool/go.sum; its version is the one that module pins.
build_keyed_tool apidiff "$here/apidifftool" golang.org/x/exp/cmd/apidiff

# metrics-server, for clusters that hack/cluster.sh starts with
# KWOK_METRICS_SERVER=1 (the HorizontalPodAutoscaler e2e assessment). Keyed on
# hack/metricsserver/go.sum; the version is stamped in so that kwokctl, which
# parses `metrics-server --version`, sees the release that module pins.
ms_version=$(awk '$1 == "sigs.k8s.io/metrics-server" {print $2} $1 == "require" && $2 == "sigs.k8s.io/metrics-server" {print $3}' "$here/metricsserver/go.mod")
build_keyed_tool metrics-server "$here/metricsserver" sigs.k8s.io/metrics-server/cmd/metrics-server \
	"-X k8s.io/client-go/pkg/version.gitVersion=$ms_version -X k8s.io/client-go/pkg/version.gitCommit=$ms_version -X k8s.io/client-go/pkg/version.buildDate=1970-01-01T00:00:00Z"

[[ -n "$announced" ]] && say "done"
echo "$bin"
