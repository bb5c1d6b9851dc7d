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
#   hack/cluster.sh audit-log   print the path of the apiserver's audit log (a
#                               cluster created with CLUSTER_AUDIT_POLICY only)
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
#   KUBE_API_QPS, KUBE_API_BURST  kube-controller-manager's and kube-scheduler's client
#                         rate limit (default: 200 and 400; see start_cluster)
#   KWOK_METRICS_SERVER   1: also run metrics-server (from hack/metricsserver), so
#                         `kubectl top` and HorizontalPodAutoscalers work; see below
#   CLUSTER_FEATURE_GATES kube-apiserver's --feature-gates, e.g.
#                         ShardedListAndWatch=true (make demo DEMO_SHARDS=3)
#   CLUSTER_SIMULATED_ROLLOUTS  1: no rollout controllers, kwok reports each
#                         Deployment rolled out (make bench-scale; see below)
#   CLUSTER_AUDIT_POLICY  an audit policy file: kube-apiserver writes the audit
#                         log it asks for (kwokctl --kube-audit-policy) to
#                         $CLUSTER_DIR/kwok/clusters/$CLUSTER_NAME/logs/audit.log,
#                         one file that is never rotated (`audit-log` prints the
#                         path; `logs` exports it too). Default: no audit log.
#
# With KWOK_METRICS_SERVER=1, kwokctl runs metrics-server as one more local
# process and kwok serves each node's resource metrics on its own loopback
# port, computed from kwok.x-k8s.io ClusterResourceUsage objects (the CRD is
# enabled: create one whose selector matches your pods to give them CPU and
# memory; a pod no ClusterResourceUsage matches has no metrics). The node is
# created with InternalIP 127.0.0.1, and metrics-server scrapes only nodes
# labelled reconcilekit.dev/metrics-scrape=loopback-verified: `up` sets that
# label only after checking that every address of the node is 127.0.0.1 and
# that its kubelet port is kwok's, and fails otherwise. So metrics-server
# never contacts anything but kwok on 127.0.0.1, and no pod or Service IP.
# kwok gives any other node it initializes InternalIP 127.0.0.1 as well.
# The controller manager syncs HorizontalPodAutoscalers every 5s instead of
# 15s and metrics-server keeps a 10s resolution (its minimum) instead of 60s.
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
	local tools=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl)
	if metrics_server; then
		tools+=(metrics-server)
	fi
	for tool in "${tools[@]}"; do
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

metrics_server() { [[ "${KWOK_METRICS_SERVER:-}" == 1 ]]; }
# CLUSTER_SIMULATED_ROLLOUTS=1 (make bench-scale): kube-controller-manager
# runs without the controllers that roll Deployments out and publish
# Services, kwok reports each Deployment rolled out
# (hack/stages/deployment-rolled-out.yaml), and there is no node.
simulated_rollouts() { [[ "${CLUSTER_SIMULATED_ROLLOUTS:-}" == 1 ]]; }

# The label metrics-server selects nodes by (--node-selector); `up` sets it on
# a node only after verify_node_loopback passed.
scrape_label=reconcilekit.dev/metrics-scrape
scrape_value=loopback-verified

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

# start_cluster creates the cluster unless it is running, creates its node
# and waits until the node is Ready: 0 when it is, 2 when a component of the
# cluster exited meanwhile, 1 on timeout.
start_cluster() {
	if exists && healthy; then
		# A cluster left running is reused only in the same mode: a run
		# that asked for simulated rollouts must not measure real ones, a
		# sharded demo needs its feature gate.
		local want=0 have=0
		if simulated_rollouts; then want=1; fi
		if [[ -f "$workdir/simulated-rollouts" ]]; then have=1; fi
		if [[ $want != "$have" ]]; then
			die "cluster $name is running with other rollouts than CLUSTER_SIMULATED_ROLLOUTS=${CLUSTER_SIMULATED_ROLLOUTS:-} asks for; stop it first: $0 down"
		fi
		have=$(cat "$workdir/feature-gates" 2>/dev/null || true)
		if [[ "${CLUSTER_FEATURE_GATES:-}" != "$have" ]]; then
			die "cluster $name is running with feature gates '$have', not CLUSTER_FEATURE_GATES='${CLUSTER_FEATURE_GATES:-}'; stop it first: $0 down"
		fi
		have=$(cat "$workdir/audit-policy" 2>/dev/null || true)
		if [[ "${audit_policy:-}" != "$have" ]]; then
			die "cluster $name is running with audit policy '$have', not CLUSTER_AUDIT_POLICY='${CLUSTER_AUDIT_POLICY:-}'; stop it first: $0 down"
		fi
		say "cluster $name is already running"
	else
		# Options that have no command-line flag. bindAddress keeps etcd, the
		# apiserver, the controller manager, the scheduler and kwok on loopback.
		# The Service IP range is a /16: kube-apiserver's default /24 runs out
		# after some 250 Services (make bench creates one per WebApp).
		local config=$cluster_dir/$name.kwokctl.yaml
		local ms_options="" ms_patches="" kcm_hpa="" kcm_controllers="" stages="" gates="" audit=""
		if [[ -n "${CLUSTER_FEATURE_GATES:-}" ]]; then
			gates="
  - key: feature-gates
    value: '$CLUSTER_FEATURE_GATES'"
		fi
		if [[ -n "$audit_policy" ]]; then
			# kube-apiserver rotates its audit log at 100 MB by default
			# (into audit-<time>.log beside it); 0 keeps one file, so a
			# reader of the path `audit-log` prints sees every event.
			audit="
  - key: audit-log-maxsize
    value: '0'"
		fi
		if simulated_rollouts; then
			kcm_controllers="
  - key: controllers
    value: '*,-deployment-controller,-replicaset-controller,-endpoints-controller,-endpointslice-controller,-endpointslice-mirroring-controller,-node-lifecycle-controller'"
			stages="---
$(cat "$repo/hack/stages/deployment-rolled-out.yaml")"
		fi
		# kube-controller-manager's and kube-scheduler's client rate limits
		# (--kube-api-qps/--kube-api-burst) raised from their defaults
		# (20/30 and 50/100), which are sized for small clusters, as large
		# production control planes raise them: after an apiserver outage
		# the controller manager has every ReplicaSet and pod the outage
		# held back to create, and at 20 requests a second the chaos
		# suite's 300 WebApps wait minutes for it (docs/reliability.md).
		local kcm_qps=${KUBE_API_QPS:-200} kcm_burst=${KUBE_API_BURST:-400}
		if metrics_server; then
			kcm_hpa="
  - key: horizontal-pod-autoscaler-sync-period
    value: 5s"
			# kwokctl adds kwok's resource metrics (kwok.x-k8s.io Metric
			# /metrics/nodes/{nodeName}/metrics/resource) to the kwok
			# controller and registers metrics-server's APIService from
			# the local manifests (nothing is downloaded).
			ms_options="
  enableMetricsServer: true
  metricsServerBinary: $bin/metrics-server
  metricsServerManifests:
  - $repo/hack/metricsserver/manifests
  enableCRDs:
  - ClusterResourceUsage"
			ms_patches="
- name: metrics-server
  extraArgs:
  - key: node-selector
    value: $scrape_label=$scrape_value
  - key: metric-resolution
    value: 10s
  - key: kubelet-request-timeout
    value: 5s
- name: kwok-controller
  extraArgs:
  - key: node-ip
    value: 127.0.0.1"
		fi
		cat >"$config" <<-EOF
			apiVersion: config.kwok.x-k8s.io/v1alpha1
			kind: KwokctlConfiguration
			options:
			  bindAddress: 127.0.0.1$ms_options
			componentsPatches:
			- name: kube-apiserver
			  extraArgs:
			  - key: service-cluster-ip-range
			    value: 10.0.0.0/16$gates$audit
			- name: kube-controller-manager
			  extraArgs:
			  - key: kube-api-qps
			    value: "$kcm_qps"
			  - key: kube-api-burst
			    value: "$kcm_burst"$kcm_hpa$kcm_controllers
			- name: kube-scheduler
			  extraArgs:
			  - key: kube-api-qps
			    value: "$kcm_qps"
			  - key: kube-api-burst
			    value: "$kcm_burst"$ms_patches
			$stages
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
		if [[ -n "$audit_policy" ]]; then
			# kwokctl copies the policy into the work dir (audit.yaml) and
			# starts kube-apiserver with --audit-policy-file on that copy
			# and --audit-log-path=$workdir/logs/audit.log.
			args+=(--kube-audit-policy "$audit_policy")
		fi
		say "starting cluster $name (work dir $workdir)"
		if ! kwokctl "${args[@]}"; then
			die "kwokctl create cluster failed; component logs are in $workdir/logs; clean up with: $0 down"
		fi
		if simulated_rollouts; then
			touch "$workdir/simulated-rollouts"
		fi
		if [[ -n "${CLUSTER_FEATURE_GATES:-}" ]]; then
			printf '%s' "$CLUSTER_FEATURE_GATES" >"$workdir/feature-gates"
		fi
		if [[ -n "$audit_policy" ]]; then
			printf '%s' "$audit_policy" >"$workdir/audit-policy"
		fi
	fi

	# One simulated node; kwok's default stages make it and its pods Ready.
	# `scale` converges to the given count, so a rerun does not add nodes.
	# Simulated rollouts make no pods, and kwok has no node stages then.
	if simulated_rollouts; then
		return 0
	elif metrics_server; then
		# Its only InternalIP is 127.0.0.1 (kwokctl's default is 192.0.2.1):
		# metrics-server scrapes the node's InternalIP at its kubelet port,
		# which kwok sets to its own.
		kwokctl scale node --replicas 1 --param '.nodeIPs=["127.0.0.1"]'
	else
		kwokctl scale node --replicas 1
	fi
	wait_node_ready
}

# wait_node_ready waits up to $wait_for for every node to be Ready (and,
# with metrics-server, its APIService to be Available), and
# returns early (2) when a process of the cluster listed in $workdir/pids has
# exited, showing the end of its log. metrics-server is started again
# instead, up to 5 times: under load it exits at start when its first
# request to a slow apiserver times out ("TLS handshake timeout"), and a new
# cluster started under the same load fails the same way (three recreations
# in a row failed so in an e2e run at load 32); `kwokctl start cluster`
# starts only the components that are not running.
wait_node_ready() {
	local timeout=${wait_for%s} pidfile component restarts=0
	[[ "$wait_for" == *m ]] && timeout=$((${wait_for%m} * 60))
	local deadline=$((SECONDS + timeout))
	while ((SECONDS < deadline)); do
		# With metrics-server, also its APIService: it can exit at start
		# when the apiserver is not serving yet (seen under load:
		# "unable to load configmap based request-header-client-ca-file …
		# connection refused"), after the node is already Ready, and
		# kwokctl does not restart it; the check below then sees it gone.
		if [[ "$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}' 2>/dev/null)" =~ ^(True )+$ ]] &&
			{ ! metrics_server || [[ "$(kubectl get apiservice v1beta1.metrics.k8s.io -o jsonpath='{.status.conditions[?(@.type=="Available")].status}' 2>/dev/null)" == True ]]; }; then
			kubectl get nodes >&2
			return 0
		fi
		for pidfile in "$workdir"/pids/*.pid; do
			[[ -f "$pidfile" ]] || continue
			if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
				component=$(basename "$pidfile" .pid)
				if [[ "$component" == metrics-server ]] && ((restarts < 5)); then
					restarts=$((restarts + 1))
					say "warning: metrics-server of cluster $name exited; starting it again ($restarts of 5); the end of its log:"
					tail -n 3 "$workdir/logs/$component.log" >&2 || true
					kwokctl start cluster || return 2
					continue 2
				fi
				say "error: $component of cluster $name exited; the end of its log:"
				tail -n 3 "$workdir/logs/$component.log" >&2 || true
				return 2
			fi
		done
		sleep 1
	done
	return 1
}

# audit_policy is CLUSTER_AUDIT_POLICY as an absolute path (kwokctl reads
# it from its own working directory), or empty.
audit_policy=
resolve_audit_policy() {
	[[ -n "${CLUSTER_AUDIT_POLICY:-}" ]] || return 0
	[[ -r "$CLUSTER_AUDIT_POLICY" ]] || die "CLUSTER_AUDIT_POLICY=$CLUSTER_AUDIT_POLICY is not a readable file"
	audit_policy=$(cd "$(dirname "$CLUSTER_AUDIT_POLICY")" && pwd)/$(basename "$CLUSTER_AUDIT_POLICY")
}

cmd_up() {
	resolve_tools || exit 1
	resolve_audit_policy
	mkdir -p "$cluster_dir"
	local start=$SECONDS

	# kwokctl picks each component's port by probing for a free one and binds
	# it only when the component starts, so a cluster created at the same
	# moment (another checkout's, another suite's) can take one in between;
	# the component then exits. Such a cluster is deleted and created again.
	local attempt rc
	for attempt in 1 2 3; do
		rc=0
		start_cluster || rc=$?
		((rc == 0)) && break
		if ((rc == 2 && attempt < 3)); then
			say "recreating cluster $name (attempt $((attempt + 1)) of 3)"
			(cmd_down) || die "could not delete cluster $name"
			continue
		fi
		die "the node of cluster $name is not Ready after $wait_for; component logs are in $workdir/logs; clean up with: $0 down"
	done
	kubectl wait --for=create serviceaccount/default --namespace default --timeout="$wait_for" >&2
	if metrics_server; then
		verify_node_loopback || die "metrics-server may only scrape 127.0.0.1: the nodes above are not labelled $scrape_label, so it does not scrape them (delete the cluster with: $0 down)"
		# metrics-server serves the API at once; a pod's CPU shows up
		# after two scrapes of its node, 10s apart.
		kubectl wait --for=condition=Available apiservice/v1beta1.metrics.k8s.io --timeout="$wait_for" >&2
	fi

	say "cluster $name is ready after $((SECONDS - start))s: $(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
	echo "$kubeconfig"
}

# verify_node_loopback checks every node before metrics-server may scrape it,
# and labels the nodes that pass for metrics-server's --node-selector:
# each address of type InternalIP or ExternalIP must be 127.0.0.1, there must
# be an InternalIP (metrics-server prefers it), and the kubelet port must be
# the port of this cluster's kwok controller, which listens on 127.0.0.1.
verify_node_loopback() {
	local kwok_port
	kwok_port=$(awk '$1 == "kwokControllerPort:" {print $2}' "$workdir/kwok.yaml")
	[[ -n "$kwok_port" ]] || {
		say "error: no kwokControllerPort in $workdir/kwok.yaml"
		return 1
	}
	local ok=0 node internal bad port
	while read -r node internal bad port; do
		if [[ "$internal" != 127.0.0.1 || "$bad" != - || "$port" != "$kwok_port" ]]; then
			say "error: node $node: InternalIP ${internal}, other non-loopback addresses ${bad%,}, kubelet port ${port:-<none>} (want InternalIP 127.0.0.1 only and port $kwok_port, kwok's); removing its $scrape_label label"
			kubectl label node "$node" "$scrape_label-" >&2 || true
			ok=1
		else
			kubectl label node "$node" --overwrite "$scrape_label=$scrape_value" >&2
		fi
	done < <(kubectl get nodes -o go-template='{{range .items}}{{.metadata.name}} {{$i := ""}}{{range .status.addresses}}{{if and (eq .type "InternalIP") (eq $i "")}}{{$i = .address}}{{end}}{{end}}{{or $i "-"}} {{$b := ""}}{{range .status.addresses}}{{if or (eq .type "InternalIP") (eq .type "ExternalIP")}}{{if ne .address "127.0.0.1"}}{{$b = printf "%s%s," $b .address}}{{end}}{{end}}{{end}}{{or $b "-"}} {{.status.daemonEndpoints.kubeletEndpoint.Port}}{{"\n"}}{{end}}')
	((ok == 0)) && say "every node's addresses are 127.0.0.1 and its kubelet port is kwok's ($kwok_port)"
	return $ok
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

cmd_audit_log() {
	exists || die "cluster $name is not running; start it with: $0 up"
	[[ -f "$workdir/audit-policy" ]] || die "cluster $name runs without an audit log (create it with CLUSTER_AUDIT_POLICY)"
	echo "$workdir/logs/audit.log"
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
audit-log) cmd_audit_log ;;
*) usage ;;
esac
