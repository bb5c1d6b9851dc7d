#!/usr/bin/env bash
# Runs the README's kind commands (the first sh block under "## A real node:
# kind") verbatim, as a reader types them, from the repository root: a line
# that fails fails the walk. Before the block's last line (make kind-down),
# the sample WebApps must become Ready. Whatever happens, the kind cluster is
# deleted and the engine stopped at the end (make kind-down).
#
# Usage: hack/readme-kind.sh [-n]   (-n: print the commands, run nothing)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

mapfile -t lines < <(awk '
	/^## A real node: kind$/ { section = 1; next }
	section && /^## / { exit }
	section && !inblock && /^```sh$/ { inblock = 1; next }
	inblock && /^```$/ { exit }
	inblock { print }
' README.md)
((${#lines[@]} >= 3)) || {
	echo "readme-kind: README.md has no sh block under '## A real node: kind'" >&2
	exit 1
}
[[ "${lines[-1]}" == "make kind-down"* ]] || {
	echo "readme-kind: the block's last line is not make kind-down: ${lines[-1]}" >&2
	exit 1
}
if [[ "${1:-}" == -n ]]; then
	printf '%s\n' "${lines[@]}"
	exit 0
fi

say() { echo "readme-kind: [${SECONDS}s] $*" >&2; }
cleanup() {
	local rc=$?
	make --no-print-directory kind-down >/dev/null 2>&1 || true
	((rc == 0)) && say PASS || say "FAIL (rc $rc)"
}
trap cleanup EXIT
# A reader's shell has none of these.
unset KUBECONFIG CLUSTER_NAME CLUSTER_DIR KIND_CLUSTER_NAME MAKEFLAGS MAKELEVEL MFLAGS

for line in "${lines[@]::${#lines[@]}-1}"; do
	say "\$ $line"
	bash -euo pipefail -c "$line"
done
say "the sample WebApps become Ready"
KUBECONFIG=.cluster/reconcilekit-kind.kind-kubeconfig bin/tools/kubectl wait --for=condition=Ready webapp --all --timeout=5m
say "\$ ${lines[-1]}"
bash -euo pipefail -c "${lines[-1]}"
