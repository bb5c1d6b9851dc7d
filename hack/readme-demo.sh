#!/usr/bin/env bash
# Runs the README's first command as a reader types it, in both forms the
# README gives: `make demo` (the line in the "## The two commands" block) and
# `make demo DEMO_SHARDS=3` (the paragraph under it), from the repository
# root. After each, every sample WebApp must be Ready and each replica
# running; then `make cluster-down` must leave no cluster, operator or
# process of either behind. Whatever happens, the demo's cluster is deleted
# at the end.
#
# Usage: hack/readme-demo.sh [-n]   (-n: print the commands, run nothing)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

# The block's `make demo` line without its comment, and the paragraph's
# sharded form (in backquotes).
plain=$(awk '
	/^## The two commands$/ { section = 1; next }
	section && /^## / { exit }
	section && /^make demo/ { sub(/[[:space:]]*#.*/, ""); print; exit }
' README.md)
sharded=$(grep -o '`make demo DEMO_SHARDS=[0-9]*`' README.md | head -n1 | tr -d '`')
[[ "$plain" == "make demo" && -n "$sharded" ]] || {
	echo "readme-demo: README.md does not show 'make demo' in '## The two commands' and a 'make demo DEMO_SHARDS=N' form (found '$plain', '$sharded')" >&2
	exit 1
}
if [[ "${1:-}" == -n ]]; then
	printf '%s\n' "$plain" "make cluster-down" "$sharded" "make cluster-down"
	exit 0
fi

say() { echo "readme-demo: [${SECONDS}s] $*" >&2; }
cleanup() {
	local rc=$?
	make --no-print-directory cluster-down >/dev/null 2>&1 || true
	((rc == 0)) && say PASS || say "FAIL (rc $rc)"
}
trap cleanup EXIT
# A reader's shell has none of these.
unset KUBECONFIG CLUSTER_NAME CLUSTER_DIR CLUSTER_FEATURE_GATES DEMO_SHARDS MAKEFLAGS MAKELEVEL MFLAGS

kubeconfig=.cluster/reconcilekit.kubeconfig
kubectl() { bin/tools/kubectl --kubeconfig "$kubeconfig" "$@"; }

# running_operators prints the pids of the demo's operator processes that
# are alive (hack/operator.sh's pid files).
running_operators() {
	local f
	for f in .cluster/operator.pid .cluster/operator-*.pid; do
		[[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"
	done
	return 0
}

for cmd in "$plain" "$sharded"; do
	replicas=1
	[[ "$cmd" =~ DEMO_SHARDS=([0-9]+) ]] && replicas=${BASH_REMATCH[1]}
	say "\$ $cmd"
	bash -euo pipefail -c "$cmd"
	say "every sample WebApp is Ready, with $replicas operator process(es) running"
	kubectl wait -n demo --for=condition=Ready webapps --all --timeout=5m
	apps=$(kubectl get -n demo webapps -o name | wc -l)
	want=1
	((replicas > 1)) && want=6
	((apps == want)) || {
		say "want $want sample WebApps in namespace demo, found $apps"
		exit 1
	}
	running=$(running_operators | wc -l)
	((running == replicas)) || {
		say "want $replicas operator process(es) running, found $running"
		exit 1
	}
	pids=$(running_operators)
	say "\$ make cluster-down"
	make --no-print-directory cluster-down
	if [[ -n "$(running_operators)" ]] || { [[ -n "$pids" ]] && kill -0 $pids 2>/dev/null; }; then
		say "an operator process outlived make cluster-down: $pids"
		exit 1
	fi
	if [[ -d .cluster/kwok/clusters/reconcilekit ]] || bash hack/cluster.sh kubeconfig >/dev/null 2>&1; then
		say "the demo's cluster outlived make cluster-down"
		exit 1
	fi
done
