#!/usr/bin/env bash
# make demo: the WebApp example operator on the local cluster.
#
#  1. starts the local cluster (hack/cluster.sh up);
#  2. installs the CRD, the generated RBAC and the webhook configurations
#     (config/local: webhooks reached by URL on 127.0.0.1);
#  3. runs the operator as a host process authenticated as its own
#     ServiceAccount (a token bound to the generated roles, never admin);
#  4. applies the sample WebApp, waits for Ready and shows what it made.
#
# The operator keeps running in the background (log: .cluster/operator.log);
# `make cluster-down` stops it and the cluster.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

say() { echo "demo: $*" >&2; }

bin=${TOOLS_BIN:-$(bash hack/tools.sh | tail -n1)}
kubeconfig=$(bash hack/cluster.sh up | tail -n1)
k() { "$bin/kubectl" --kubeconfig "$kubeconfig" --cache-dir "$repo/.cluster/kubectl-cache" "$@"; }

say "installing the CRD, RBAC and webhook configurations (examples/webapp/config/local)"
k apply --server-side -k examples/webapp/config/local >/dev/null
k wait --for=condition=Established crd/webapps.apps.example.com --timeout=60s >/dev/null

say "building the operator"
(cd examples && go build -o ../bin/webapp-operator ./webapp) # examples/ is a module of its own

operator_kubeconfig=$(bash hack/operator.sh kubeconfig "$kubeconfig")
bash hack/operator.sh start "$operator_kubeconfig"

say "applying config/samples/apps_v1_webapp.yaml"
k create namespace demo --dry-run=client -o yaml | k apply -f - >/dev/null
k apply -n demo -f examples/webapp/config/samples/apps_v1_webapp.yaml
k wait -n demo --for=condition=Ready webapp/webapp-sample --timeout=180s
echo
k get -n demo webapps,deploy,svc
cat <<EOF

The WebApp operator is running as a host process (ServiceAccount webapp-system/webapp-controller-manager).
Look around:
  export KUBECONFIG=$kubeconfig
  $bin/kubectl get webapps -A            # the printer columns: READY, REPLICAS, IMAGE, AGE
  $bin/kubectl describe webapp -n demo webapp-sample
  $bin/kubectl scale webapp -n demo webapp-sample --replicas=5
  $bin/kubectl get configmap -n webapp-system -l apps.example.com/route-registry=shard -o yaml   # the route registry's 16 shards
  tail -f $repo/.cluster/operator.log
Stop everything with: make cluster-down
EOF
