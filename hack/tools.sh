#!/usr/bin/env bash
# Builds the test toolchain from source into a cache outside the checkout and
# prints the bin directory on its last line.
#
# Nothing here downloads a prebuilt binary. Most tools the tests and the
# clusters run are `tool`s of the one module in hack/tools, built by one
# `go build`: the control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl), kwok and kwokctl,
# controller-gen, helm, and kind with its node's binaries (kubelet, kubeadm,
# kube-proxy, crictl, the CNI plugins, pause, and CoreDNS from
# hack/tools/coredns with only the plugins its Corefile uses). One module
# graph holds one version of every package they share (k8s.io/api,
# client-go, grpc, ...), so a cold build compiles each once: `go install`ed
# from their own modules, kwok, controller-gen, helm and the node's binaries
# each compiled their own copy (212 MB of Go source for these tools then,
# 120 MB in one graph, counted with `go list -deps`). Measured cold on two
# idle cores, the whole toolchain took 21.5 minutes.
#
# A binary that is already in the cache is never rebuilt, so a second run
# returns in seconds; the cache key is the Kubernetes and golangci-lint
# versions below plus a hash of hack/tools/go.sum, so changing a pin builds
# into a fresh directory.
#
# Built apart, each keyed on its own module's go.sum (a stamp next to the
# binary records the hash; a different hash rebuilds that binary only):
# golangci-lint, with the Kubernetes API linter (sigs.k8s.io/kube-api-linter)
# and logcheck compiled in as module plugins, from the small module in
# hack/tools/lint (what `golangci-lint custom` generates, without its git
# clone; one binary serves `make lint` and the API linter); apidiff from
# hack/apidifftool; metrics-server from hack/metricsserver (4 of the 21.5
# minutes). metrics-server v0.8.0 compiles against hack/tools' k8s.io/*
# v0.37.2, but does not start: its generated OpenAPI names its types as
# before v0.34 ("cannot find model definition for
# io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics"), so it keeps its own
# release's k8s.io/* v0.33.
#
# Usage: hack/tools.sh          build what is missing, print the bin directory
#        hack/tools.sh --dir    print the bin directory, build nothing
#
# Environment:
#   RECONCILEKIT_CACHE  cache root (default: $HOME/.cache/reconcilekit)
#   TOOLS_ONLY          space-separated subset of tools to build (default: all)
#   TOOLS_DEFER         space-separated tools not to build now (make test's
#                       checks chain defers metrics-server, which only the e2e
#                       suite runs, to the kind-build chain)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

# The Kubernetes release the control plane and the kind node run; kwok's,
# controller-gen's, helm's and kind's versions are hack/tools/go.mod's.
K8S_VERSION=v1.37.2
GOLANGCI_LINT_VERSION=v2.15.0
modver() { awk -v m="$1" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' "$here/tools/go.mod"; }
KWOK_VERSION=$(modver sigs.k8s.io/kwok)
CONTROLLER_TOOLS_VERSION=$(modver sigs.k8s.io/controller-tools)
HELM_VERSION=$(modver helm.sh/helm/v4)

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
#
# Built as vet and the tests build (cgo off, no -trimpath: the Makefile's
# settings), every package the toolchain shares with this repository's modules
# compiles once, here, and vet and the tests find it in the build cache:
# k8s.io/api, apimachinery, client-go, helm, kustomize, grpc, ... (1,226
# packages at v1.37.2). That holds only while the modules build those
# packages' dependencies at the toolchain's versions: hack/modversions.sh
# compares them (make verify-modules). With -trimpath, as until 2026-12-08,
# every one of them compiled twice in a cold make test.
export GOFLAGS=-buildvcs=false CGO_ENABLED=0

# wanted NAME: NAME is asked for (TOOLS_ONLY) and not deferred (TOOLS_DEFER).
wanted() {
	[[ -z "${TOOLS_ONLY:-}" || " $TOOLS_ONLY " == *" $1 "* ]] && [[ " ${TOOLS_DEFER:-} " != *" $1 "* ]]
}

want() {
	local name=$1
	wanted "$name" || return 1
	[[ -x "$bin/$name" ]] && return 1
	return 0
}

announced=
announce() {
	if [[ -z "$announced" ]]; then
		say "building the test toolchain from source into $bin"
		say "a cold build takes about 20 minutes on two cores; later runs reuse the cache"
		announced=1
	fi
	say "building $1"
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
	wanted "$name" || return 0
	announce "$name ($dir, go.sum $key)"
	(cd "$dir" && go build -ldflags "-s -w $ldflags" -o "$bin/$name.tmp" "$pkg")
	mv "$bin/$name.tmp" "$bin/$name"
	echo "$key" >"$stamp"
}

# The tools of hack/tools/go.mod, as NAME=PACKAGE (NAME is the binary).
module_tools=(
	etcd=go.etcd.io/etcd/server/v3
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
	kubectl=k8s.io/kubernetes/cmd/kubectl
	kwok=sigs.k8s.io/kwok/cmd/kwok
	kwokctl=sigs.k8s.io/kwok/cmd/kwokctl
	controller-gen=sigs.k8s.io/controller-tools/cmd/controller-gen
	helm=helm.sh/helm/v4/cmd/helm
	kind=sigs.k8s.io/kind
	kubelet=k8s.io/kubernetes/cmd/kubelet
	kubeadm=k8s.io/kubernetes/cmd/kubeadm
	kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
	crictl=sigs.k8s.io/cri-tools/cmd/crictl
	cni-ptp=github.com/containernetworking/plugins/plugins/main/ptp
	cni-loopback=github.com/containernetworking/plugins/plugins/main/loopback
	cni-host-local=github.com/containernetworking/plugins/plugins/ipam/host-local
	cni-portmap=github.com/containernetworking/plugins/plugins/meta/portmap
	coredns=./coredns
	pause=./pause
)

# Versions stamped in as each project's release build does: Kubernetes'
# (component-base and client-go, which kwokctl and kind read back with
# --version), controller-gen's (written into every CRD it generates) and
# helm's. An -X for a package a binary does not link is ignored.
major=${K8S_VERSION#v}
major=${major%%.*}
minor=${K8S_VERSION#v*.}
minor=${minor%%.*}
ldflags="-X sigs.k8s.io/controller-tools/pkg/version.version=$CONTROLLER_TOOLS_VERSION"
ldflags+=" -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

# build_module_tools LDFLAGS NAME=PACKAGE...: one go build of the missing
# ones, from hack/tools. go build -o DIR/ names a binary after its package's
# last path element, less a major version suffix (go.etcd.io/etcd/server/v3
# is "server").
build_module_tools() {
	local flags=$1 t names=() pkgs=() out tmp
	shift
	for t in "$@"; do
		want "${t%%=*}" || continue
		names+=("${t%%=*}")
		pkgs+=("${t#*=}")
	done
	((${#pkgs[@]})) || return 0
	announce "${names[*]} (hack/tools, one go build)"
	tmp=$(mktemp -d "$bin/.build.XXXXXX")
	(cd "$here/tools" && go build -ldflags "-s -w $flags" -o "$tmp/" "${pkgs[@]}")
	for t in "${!names[@]}"; do
		out=${pkgs[t]}
		[[ "$out" =~ /v[0-9]+$ ]] && out=${out%/*}
		mv "$tmp/${out##*/}" "$bin/${names[t]}"
	done
	rm -rf "$tmp"
}
build_module_tools "$ldflags" "${module_tools[@]}"

# The golangci-lint release hack/tools/lint builds is the one the cache key names.
if ! grep -q "github.com/golangci/golangci-lint/v2 $GOLANGCI_LINT_VERSION\$" "$here/tools/lint/go.mod"; then
	say "error: hack/tools/lint/go.mod does not pin github.com/golangci/golangci-lint/v2 $GOLANGCI_LINT_VERSION"
	exit 1
fi
build_keyed_tool golangci-lint "$here/tools/lint" .
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
