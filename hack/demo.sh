#!/usr/bin/env bash
# make demo: runs the WebApp example operator on the local cluster.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

kubeconfig=$(bash hack/cluster.sh up | tail -n1)
if [[ ! -f examples/webapp/main.go ]]; then
	echo "demo: the local cluster is up (kubeconfig: $kubeconfig), but the WebApp example operator"
	echo "demo: (examples/webapp/main.go) does not exist yet, so there is nothing to run on it."
	echo "demo: stop the cluster with 'make cluster-down'."
	exit 1
fi
