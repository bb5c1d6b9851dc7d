#!/usr/bin/env bash
# make deploy: the WebApp operator (config/default) onto the cluster of
# $KUBECONFIG, returning only once it admits WebApps. `kubectl apply` returns
# as soon as the objects exist, and a WebApp created then is refused
# (`failed calling webhook "mwebapp-v1.kb.io" ... connection refused`) until
# a replica is Ready behind the webhook Service and the leader has injected
# the webhook CA; so this waits for the rollout, then for a server-side
# dry-run create of the sample to pass both webhooks.
#
# Usage: hack/deploy.sh KUBECTL
# Environment: DEPLOY_TIMEOUT (seconds, default 300) bounds each wait.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
kubectl=${1:?usage: $0 KUBECTL}
timeout=${DEPLOY_TIMEOUT:-300}
sample=$repo/examples/webapp/config/samples/apps_v2_webapp.yaml

"$kubectl" apply --server-side -k "$repo/examples/webapp/config/default"
"$kubectl" -n webapp-system rollout status deployment/webapp-controller-manager --timeout="${timeout}s"

deadline=$((SECONDS + timeout))
until out=$("$kubectl" create --dry-run=server -f "$sample" -o name 2>&1); do
	if ((SECONDS >= deadline)); then
		echo "deploy: the WebApp webhooks do not admit the sample after ${timeout}s: $out" >&2
		exit 1
	fi
	sleep 2
done
echo "deploy: the operator is rolled out and its webhooks admit WebApps ($out, dry run)"
