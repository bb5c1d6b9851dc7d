#!/usr/bin/env bash
# Runs a local Kubernetes cluster for development and e2e tests, built only
# from the binaries hack/tools.sh compiled: kwokctl's "binary" runtime starts a
# real etcd, kube-apiserver, kube-controller-manager and kube-scheduler as
# local processes, and kwok simulates one node whose pods become Ready without
# running any container. Nothing is downloaded and no container engine is used.
#
# Usage:
#   hack/cluster.sh up          create (or reuse) the cluster, wait until its node
#                               is Ready and the default ServiceAccount exists;
#                               the last line of stdout is the kubeconfig path
#   hack/cluster.sh down        delete the cluster and every process it started
#   hack/cluster.sh kubeconfig  print the kubeconfig path of the running cluster
#   hack/cluster.sh logs DIR    export the component logs into DIR/<cluster name>
#
# Everything kwokctl writes stays under the checkout: its work dir is
# $CLUSTER_DIR/kwok and the kubeconfig is a file of its own, so ~/.kube/config
# and ~/.kwok are never read or written. Every component listens on 127.0.0.1.
# Pod and Service IPs in this cluster are fake: only the apiserver is reachable.
#
# Environment:
#   CLUSTER_NAME          cluster name (default: reconcilekit)
#   CLUSTER_DIR           state directory (default: <repo>/.cluster)
#   CLUSTER_KUBECONFIG    kubeconfig to write (default: $CLUSTER_DIR/$CLUSTER_NAME.kubeconfig)
#   CLUSTER_WAIT          how long to wait for readiness (default: 180s)
#   KUBE_APISERVER_PORT   fixed apiserver port (default: a free port kwokctl picks)
#   TOOLS_BIN             directory with the binaries (default: last line of hack/tools.sh)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)

name=${CLUSTER_NAME:-reconcilekit}
cluster_dir=${CLUSTER_DIR:-$repo/.cluster}
kubeconfig=${CLUSTER_KUBECONFIG:-$cluster_dir/$name.kubeconfig}
wait_for=${CLUSTER_WAIT:-180s}

# kwokctl keeps all of its state (cluster configs, pki, etcd data, logs and
# its download cache, which stays empty because every binary is a local path)
# under KWOK_WORKDIR instead of ~/.kwok.
export KWOK_WORKDIR=$cluster_dir/kwok
workdir=$KWOK_WORKDIR/clusters/$name

say() { echo "cluster: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

usage() {
	sed -n '/^# Usage:/,/^# Environment:/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

# resolve_tools sets $bin and points kwokctl at the binaries in it, both through
# flags (create) and through its environment variables, which it consults for
# every subcommand; KWOK_KUBECTL_BINARY and PATH cover `kwokctl kubectl`.
resolve_tools() {
	bin=${TOOLS_BIN:-}
	if [[ -z "$bin" ]]; then
		say "TOOLS_BIN is not set; asking hack/tools.sh for the bin dir"
		bin=$("$repo/hack/tools.sh" | tail -n 1) || {
			say "error: hack/tools.sh failed"
			return 1
		}
	fi
	local tool missing=()
	for tool in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl; do
		[[ -x "$bin/$tool" ]] || missing+=("$tool")
	done
	if ((${#missing[@]})); then
		say "error: missing in ${bin:-<empty TOOLS_BIN>}: ${missing[*]} (run hack/tools.sh)"
		return 1
	fi
	bin=$(cd "$bin" && pwd)
	export PATH="$bin:$PATH"
	export KWOK_RUNTIME=binary
	export KWOK_ETCD_BINARY=$bin/etcd
	export KWOK_KUBE_APISERVER_BINARY=$bin/kube-apiserver
	export KWOK_KUBE_CONTROLLER_MANAGER_BINARY=$bin/kube-controller-manager
	export KWOK_KUBE_SCHEDULER_BINARY=$bin/kube-scheduler
	export KWOK_CONTROLLER_BINARY=$bin/kwok
	export KWOK_KUBECTL_BINARY=$bin/kubectl
}

kwokctl() { "$bin/kwokctl" --name "$name" "$@" >&2; }
# --cache-dir keeps kubectl's discovery cache out of ~/.kube as well.
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" --cache-dir "$cluster_dir/kubectl-cache" "$@"; }

exists() { [[ -f "$workdir/kwok.yaml" ]]; }

healthy() {
	[[ -f "$kubeconfig" ]] && kubectl get --raw /readyz >/dev/null 2>&1
}

# pids_of_cluster lists every process whose command line mentions this
# cluster's work dir: the components run from $workdir/bin and read their
# certificates, kubeconfigs and data from it, so this matches exactly the
# processes of this cluster and of no other.
pids_of_cluster() {
	local pattern
	pattern=$(printf '%s/' "$workdir" | sed 's/[][\.*^$+?(){}|]/\\&/g')
	pgrep -f -- "$pattern" || true
}

cmd_up() {
	resolve_tools || exit 1
	mkdir -p "$cluster_dir"
	local start=$SECONDS

	if exists && healthy; then
		say "cluster $name is already running"
	else
		# Options that have no command-line flag. bindAddress keeps etcd, the
		# apiserver, the controller manager, the scheduler and kwok on loopback.
		# The Service IP range is a /16: kube-apiserver's default /24 runs out
		# after some 250 Services (make bench creates one per WebApp).
		local config=$cluster_dir/$name.kwokctl.yaml
		cat >"$config" <<-EOF
			apiVersion: config.kwok.x-k8s.io/v1alpha1
			kind: KwokctlConfiguration
			options:
			  bindAddress: 127.0.0.1
			componentsPatches:
			- name: kube-apiserver
			  extraArgs:
			  - key: service-cluster-ip-range
			    value: 10.0.0.0/16
		EOF
		local args=(
			create cluster
			--config "$config"
			--runtime binary
			--kubeconfig "$kubeconfig"
			--etcd-binary "$bin/etcd"
			--kube-apiserver-binary "$bin/kube-apiserver"
			--kube-controller-manager-binary "$bin/kube-controller-manager"
			--kube-scheduler-binary "$bin/kube-scheduler"
			--kwok-controller-binary "$bin/kwok"
			--quiet-pull
			--wait "$wait_for"
		)
		if [[ -n "${KUBE_APISERVER_PORT:-}" ]]; then
			args+=(--kube-apiserver-port "$KUBE_APISERVER_PORT")
		fi
		say "starting cluster $name (work dir $workdir)"
		if ! kwokctl "${args[@]}"; then
			die "kwokctl create cluster failed; component logs are in $workdir/logs; clean up with: $0 down"
		fi
	fi

	# One simulated node; kwok's default stages make it and its pods Ready.
	# `scale` converges to the given count, so a rerun does not add nodes.
	kwokctl scale node --replicas 1
	kubectl wait --for=condition=Ready node --all --timeout="$wait_for" >&2
	kubectl wait --for=create serviceaccount/default --namespace default --timeout="$wait_for" >&2

	say "cluster $name is ready after $((SECONDS - start))s: $(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
	echo "$kubeconfig"
}

cmd_down() {
	# A host-process operator started by hack/operator.sh (make demo) goes
	# down with the cluster it talks to.
	CLUSTER_DIR=$cluster_dir bash "$repo/hack/operator.sh" stop || true
	if ! resolve_tools; then
		say "tools are unavailable; only stopping leftover processes"
		bin=
	fi
	# Remember the cluster's processes: after they exit, their parent (init,
	# as kwokctl detaches them) still has to reap them, and `down` returns
	# only once they are gone from the process table.
	local pids before
	before=$(pids_of_cluster)
	if [[ -n "$bin" ]] && exists; then
		say "deleting cluster $name"
		kwokctl delete cluster --kubeconfig "$kubeconfig" ||
			say "kwokctl delete cluster failed; stopping leftover processes"
	else
		say "cluster $name does not exist"
	fi

	pids=$(pids_of_cluster)
	if [[ -n "$pids" ]]; then
		say "stopping leftover processes: $(echo $pids)"
		kill -TERM $pids 2>/dev/null || true
		if ! wait_gone 15 $pids; then
			kill -KILL $pids 2>/dev/null || true
			wait_gone 5 $pids || true
		fi
	fi
	rm -rf "$workdir"
	rm -f "$kubeconfig" "$cluster_dir/$name.kwokctl.yaml"

	pids=$(pids_of_cluster)
	[[ -z "$pids" ]] || die "processes of cluster $name survived: $pids"
	wait_gone 15 $before || say "warning: exited processes not yet reaped: $(echo $before)"
	say "cluster $name is gone"
}

# wait_gone SECONDS PID...: wait until none of the PIDs is in the process
# table any more (zombies included); false on timeout.
wait_gone() {
	local deadline=$((SECONDS + $1)) pid alive
	shift
	while :; do
		alive=
		for pid in "$@"; do
			if [[ -e /proc/$pid ]]; then
				alive=1
				break
			fi
		done
		[[ -n "$alive" ]] || return 0
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

cmd_kubeconfig() {
	exists && [[ -f "$kubeconfig" ]] || die "cluster $name is not running; start it with: $0 up"
	echo "$kubeconfig"
}

cmd_logs() {
	local dest=${1:-}
	[[ -n "$dest" ]] || usage
	resolve_tools || exit 1
	exists || die "cluster $name does not exist"
	mkdir -p "$dest"
	kwokctl export logs "$dest"
	say "logs of cluster $name exported to $dest/$name"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
kubeconfig) cmd_kubeconfig ;;
logs) cmd_logs "${2:-}" ;;
*) usage ;;
esac
