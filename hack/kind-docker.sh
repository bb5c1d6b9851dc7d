#!/usr/bin/env bash
# The README's laptop path (Docker and kind), proven on this machine: runs
# the README's second sh block under "## A real node: kind" verbatim, with
# `docker` and `kind` on PATH being the private engine's CLI (DOCKER_HOST is
# its socket) and hack/kind.sh's kind, the cluster created from our node
# image and configuration (KIND_NODE_IMAGE, KIND_CONFIG; a laptop uses kind's
# public node image and needs neither), the base images of the repo's
# Dockerfiles tagged by hack/image.sh stand-ins (a laptop pulls them), and
# `docker build --network host` (the engine has no default bridge; a
# laptop's Docker has one). What the suite does is the laptop's: docker
# build examples/webapp/Dockerfile and hack/web/Dockerfile, kind
# load, the e2e suite on kind.
#
# Usage: hack/kind-docker.sh [-n]   (-n: print the command, run nothing)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

line=$(awk '
	/^## A real node: kind$/ { section = 1; next }
	section && /^## / { exit }
	section && !inblock && /^```sh$/ { inblock = 1; blocks++; next }
	inblock && /^```$/ { inblock = 0; next }
	inblock && blocks == 2 { print }
' README.md)
[[ "$line" == *KIND_BINARY=* && "$line" != *$'\n'* ]] || {
	echo "kind-docker: README.md's second sh block under '## A real node: kind' is not the one KIND_BINARY line: $line" >&2
	exit 1
}
if [[ "${1:-}" == -n ]]; then
	echo "$line"
	exit 0
fi

say() { echo "kind-docker: [${SECONDS}s] $*" >&2; }
cluster=reconcilekit-kind-docker
cleanup() {
	local rc=$?
	# The suite deletes its cluster; this is for a run cut short.
	KIND_CLUSTER_NAME=$cluster bash hack/kind.sh down >/dev/null 2>&1 || true
	((rc == 0)) && say PASS || say "FAIL (rc $rc)"
}
trap cleanup EXIT

engine_bin=$(bash hack/engine.sh --dir)
export KIND_NODE_IMAGE KIND_CONFIG
KIND_NODE_IMAGE=$(bash hack/kind.sh image | tail -n 1)
KIND_CONFIG=$(KIND_CLUSTER_NAME=$cluster bash hack/kind.sh config)
bash hack/image.sh stand-ins
tools_bin=$(bash hack/tools.sh --dir)
export PATH="$engine_bin:$tools_bin:$PATH" DOCKER_HOST=unix://${ENGINE_DIR:-$repo/.cluster/engine}/docker.sock
export KIND_EXPERIMENTAL_PROVIDER=docker DOCKER_BUILDKIT=0 DOCKER_BUILD_FLAGS="--network host" E2E_CLUSTER_NAME=$cluster
unset KUBECONFIG TOOLS_BIN
say "\$ $line"
bash -euo pipefail -c "$line"
