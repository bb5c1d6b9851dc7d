#!/usr/bin/env bash
# Runs the WebApp operator as a host process against the local cluster,
# authenticated as its own ServiceAccount, so it has exactly the permissions
# of the RBAC generated from its markers and nothing more.
#
# Usage:
#   hack/operator.sh kubeconfig ADMIN_KUBECONFIG   write .cluster/operator.kubeconfig (a ServiceAccount token) and print its path
#   hack/operator.sh start OPERATOR_KUBECONFIG [N] start bin/webapp-operator in the background, wait for /readyz;
#                                                  with N, replica N of a sharded operator (--sharding, identity
#                                                  replica-N, every port + N, log operator-N.log)
#   hack/operator.sh stop                          stop every replica
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-$repo/.cluster}
namespace=webapp-system
sa=webapp-controller-manager

say() { echo "operator: $*" >&2; }

cmd_kubeconfig() {
	local admin=$1 bin server ca token out=$dir/operator.kubeconfig
	bin=${TOOLS_BIN:-$(bash "$repo/hack/tools.sh" --dir)}
	k() { "$bin/kubectl" --kubeconfig "$admin" --cache-dir "$dir/kubectl-cache" "$@"; }
	server=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
	ca=$(k config view --minify --raw --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
	token=$(k create token "$sa" -n "$namespace" --duration=24h)
	umask 077
	cat >"$out" <<-YAML
		apiVersion: v1
		kind: Config
		clusters:
		- name: local
		  cluster:
		    server: $server
		    certificate-authority-data: $ca
		users:
		- name: $namespace:$sa
		  user:
		    token: $token
		contexts:
		- name: operator
		  context: {cluster: local, user: "$namespace:$sa", namespace: $namespace}
		current-context: operator
	YAML
	echo "$out"
}

cmd_start() {
	local kubeconfig=$1 replica=${2:-} pidfile=$dir/operator.pid log=$dir/operator.log offset=0 sharding=()
	if [[ -n "$replica" ]]; then
		# Replica 0 serves the webhooks config/local names (port 9443);
		# the others serve theirs on ports the API server is not given.
		pidfile=$dir/operator-$replica.pid log=$dir/operator-$replica.log offset=$replica
		sharding=(--sharding --shard-identity "replica-$replica")
	else
		cmd_stop >/dev/null 2>&1 || true
	fi
	mkdir -p "$dir"
	say "starting bin/webapp-operator ${replica:+replica $replica }as ServiceAccount $namespace/$sa (log: $log)"
	nohup "$repo/bin/webapp-operator" \
		--kubeconfig "$kubeconfig" \
		--namespace "$namespace" \
		--leader-elect "${sharding[@]}" \
		--webhook-host 127.0.0.1 --webhook-port $((9443 + offset)) --webhook-cert-ips 127.0.0.1 \
		--health-probe-bind-address 127.0.0.1:$((8081 + offset)) \
		--metrics-bind-address 127.0.0.1:$((8443 + offset)) \
		>"$log" 2>&1 &
	echo $! >"$pidfile"
	local deadline=$((SECONDS + 120))
	until curl -fsS "http://127.0.0.1:$((8081 + offset))/readyz" >/dev/null 2>&1; do
		if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
			say "the operator exited; last lines of $log:"
			tail -n 30 "$log" >&2
			exit 1
		fi
		if ((SECONDS > deadline)); then
			say "the operator did not become ready in 120s; last lines of $log:"
			tail -n 30 "$log" >&2
			exit 1
		fi
		sleep 1
	done
	say "ready (pid $(cat "$pidfile"))"
}

cmd_stop() {
	local pidfile pid
	for pidfile in "$dir"/operator.pid "$dir"/operator-*.pid; do
		[[ -f "$pidfile" ]] || continue
		pid=$(cat "$pidfile")
		if kill -0 "$pid" 2>/dev/null; then
			say "stopping pid $pid"
			kill -TERM "$pid"
			for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$pidfile"
	done
}

case "${1:-}" in
kubeconfig) cmd_kubeconfig "${2:?admin kubeconfig}" ;;
start) cmd_start "${2:?operator kubeconfig}" "${3:-}" ;;
stop) cmd_stop ;;
*) sed -n '/^# Usage:/,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
