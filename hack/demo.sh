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
#
# DEMO_SHARDS=N (N > 1) runs N sharded replicas instead (--sharding,
# docs/sharding.md): the cluster's API server with the ShardedListAndWatch
# feature gate, config/local-sharded (the Lease verbs of --sharding), logs
# .cluster/operator-<i>.log, and six sample WebApps, which the replicas share.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

say() { echo "demo: $*" >&2; }

shards=${DEMO_SHARDS:-1}
if ! [[ "$shards" =~ ^[1-9][0-9]*$ ]]; then
	echo "demo: DEMO_SHARDS must be a positive number of replicas, not '$shards'" >&2
	exit 2
fi
config=examples/webapp/config/local
if ((shards > 1)); then
	export CLUSTER_FEATURE_GATES=ShardedListAndWatch=true
	config=examples/webapp/config/local-sharded
fi

bin=${TOOLS_BIN:-$(bash hack/tools.sh | tail -n1)}
kubeconfig=$(bash hack/cluster.sh up | tail -n1)
k() { "$bin/kubectl" --kubeconfig "$kubeconfig" --cache-dir "$repo/.cluster/kubectl-cache" "$@"; }

say "installing the CRD, RBAC and webhook configurations ($config)"
k apply --server-side -k "$config" >/dev/null
k wait --for=condition=Established crd/webapps.apps.example.com --timeout=60s >/dev/null

say "building the operator"
(cd examples && go build -o ../bin/webapp-operator ./webapp) # examples/ is a module of its own

operator_kubeconfig=$(bash hack/operator.sh kubeconfig "$kubeconfig")
if ((shards == 1)); then
	bash hack/operator.sh start "$operator_kubeconfig"
else
	bash hack/operator.sh stop
	for ((i = 0; i < shards; i++)); do
		bash hack/operator.sh start "$operator_kubeconfig" "$i"
	done
fi

say "applying config/samples/apps_v1_webapp.yaml"
k create namespace demo --dry-run=client -o yaml | k apply -f - >/dev/null
k apply -n demo -f examples/webapp/config/samples/apps_v1_webapp.yaml
if ((shards > 1)); then
	for i in 1 2 3 4 5; do
		sed "s/name: webapp-sample$/name: webapp-sample-$i/" examples/webapp/config/samples/apps_v1_webapp.yaml | k apply -n demo -f -
	done
fi
k wait -n demo --for=condition=Ready webapps --all --timeout=180s
echo
k get -n demo webapps,deploy,svc
if ((shards > 1)); then
	echo
	say "the replicas' Leases and the hash ranges each claims; each Deployment carries its WebApp's range"
	k get -n webapp-system leases -l sharding.reconcilekit.io/group=webapp-operator \
		-o custom-columns='NAME:.metadata.name,CLAIMS:.metadata.annotations.sharding\.reconcilekit\.io/claims'
	k get -n demo deploy -L sharding.reconcilekit.io/range-webapp-operator
	cat <<EOF

$shards replicas share the WebApps (logs: $repo/.cluster/operator-<i>.log). Stop one and watch
the others take its ranges within the lease duration (15 s):
  kill \$(cat $repo/.cluster/operator-1.pid)
  $bin/kubectl --kubeconfig $kubeconfig get -n webapp-system leases -l sharding.reconcilekit.io/group=webapp-operator -w
Stop everything with: make cluster-down
EOF
	exit 0
fi
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
