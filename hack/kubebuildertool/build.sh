#!/usr/bin/env bash
# Builds kubebuilder from the Go module proxy into a cache outside the
# checkout and prints its bin directory on the last line. Nothing prebuilt is
# downloaded.
#
# The version is the one this directory's go.mod pins (a module of its own,
# like hack/metricsserver, so hack/tools/go.sum and the control plane's cache key
# stay as they are). The cache directory is keyed on that version and a hash
# of this go.sum, so a new pin builds into a fresh directory and a warm cache
# returns at once.
#
# The binary is built with `go install sigs.k8s.io/kubebuilder/v4@VERSION`,
# not `go build` inside this module: only then does kubebuilder's build info
# carry its release version, which it writes into a scaffold's PROJECT file
# (cliVersion) and prints in `kubebuilder version`; a `go build` from here
# would report "(devel)". The versions go install resolves are kubebuilder's
# own go.mod requirements, the same ones this go.sum records.
#
# Usage: hack/kubebuildertool/build.sh          build if missing, print the bin directory
#        hack/kubebuildertool/build.sh --dir    print the bin directory, build nothing
#
# Environment:
#   RECONCILEKIT_CACHE  cache root (default: $HOME/.cache/reconcilekit)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '$1 == "sigs.k8s.io/kubebuilder/v4" {print $2} $1 == "require" && $2 == "sigs.k8s.io/kubebuilder/v4" {print $3}' "$here/go.mod")
[[ -n "$version" ]] || {
	echo "kubebuildertool: $here/go.mod does not require sigs.k8s.io/kubebuilder/v4" >&2
	exit 1
}
sum=$(sha256sum "$here/go.sum" | cut -c1-12)
cache_root=${RECONCILEKIT_CACHE:-$HOME/.cache/reconcilekit}
bin="$cache_root/kubebuilder-$version-$sum/bin"
if [[ "${1:-}" == "--dir" ]]; then
	echo "$bin"
	exit 0
fi
if [[ ! -x "$bin/kubebuilder" ]]; then
	echo "kubebuildertool: building kubebuilder $version into $bin (two to three minutes on two cores with a cold Go build cache)" >&2
	mkdir -p "$bin"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0 GOBIN="$tmp" \
		go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kubebuilder/v4@$version")
	mv "$tmp/kubebuilder" "$bin/kubebuilder"
fi
echo "$bin"
