#!/usr/bin/env bash
# A real one-node kind cluster, built and run offline on the private engine of
# hack/engine.sh.
#
# `kind build node-image` pulls images (kindnetd, pause, etcd, coredns, ...)
# and kindest/base from registries, so the node image is assembled here with
# kind's own layout instead (the files and recipe of images/base in the
# sigs.k8s.io/kind module):
#   - a Debian bookworm root filesystem made with debootstrap (systemd and the
#     packages kind's base image installs), with kind's files from the module;
#   - containerd, its runc shim and runc from hack/engine.sh's cache;
#   - kind itself, kubelet, kubeadm, kube-proxy, crictl, the CNI plugins (ptp,
#     host-local, loopback, portmap), CoreDNS (hack/tools/coredns: only the
#     plugins the Corefile uses), pause, kubectl and the control plane, all
#     from the toolchain hack/tools.sh builds (the hack/tools module);
#   - every image `kubeadm config images list` names, built here and imported
#     under that exact name into the node's containerd (content only, as kind
#     does): kube-apiserver, kube-controller-manager, kube-scheduler, etcd,
#     coredns and pause FROM scratch from our static binaries; kube-proxy on a
#     small Debian root with iptables.
# kind's default CNI (kindnetd) and storage provisioner are images we cannot
# pull: the cluster disables the default CNI and the node carries a ptp CNI
# configuration for its pod range instead; the default StorageClass is kind's
# legacy host-path one.
#
# This host is cgroup v1 and its capability bounding set lacks
# CAP_SYS_RESOURCE, so the node differs from kind's in: containerd uses
# cgroupfs and restrict_oom_score_adj, the kubelet cgroupfs and
# failCgroupV1: false.
#
# Usage:
#   hack/kind.sh image   build the node image (and load it into the engine,
#                        which is left stopped if it was); last line: the
#                        image name
#   hack/kind.sh up      engine up, image, create (or reuse) the cluster; last
#                        line: the kubeconfig path
#   hack/kind.sh down    delete the cluster; stop the engine unless another
#                        kind cluster still runs on it
#   hack/kind.sh kubeconfig  print the kubeconfig path of the running cluster
#   hack/kind.sh config  write the cluster configuration `up` creates with;
#                        print its path
#   hack/kind.sh logs DIR    export the node's logs into DIR/<cluster name>
#   hack/kind.sh load IMAGE...  kind load docker-image from the engine
#
# Environment:
#   KIND_CLUSTER_NAME   cluster name (default: $CLUSTER_NAME, else reconcilekit-kind);
#                       the kubeconfig is $CLUSTER_DIR/<name>.kind-kubeconfig
#   CLUSTER_DIR         state directory (default: <repo>/.cluster)
#   RECONCILEKIT_CACHE  cache root (default: $HOME/.cache/reconcilekit)
#   DEBIAN_MIRROR       Debian mirror for debootstrap (default: http://deb.debian.org/debian)
#   KEEP_ENGINE=1       `down` leaves the engine running in any case
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)

# kind's, crictl's, the CNI plugins' and CoreDNS's versions are
# hack/tools/go.mod's; the node runs the Kubernetes release hack/tools.sh
# builds.
K8S_VERSION=v1.37.2
DEBIAN_SUITE=bookworm
# Bump when the node image's recipe below changes.
NODE_REVISION=2

name=${KIND_CLUSTER_NAME:-${CLUSTER_NAME:-reconcilekit-kind}}
cluster_dir=${CLUSTER_DIR:-$repo/.cluster}
kubeconfig=$cluster_dir/$name.kind-kubeconfig
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache_root=${RECONCILEKIT_CACHE:-$HOME/.cache/reconcilekit}
# The node image's work and the images it is made of; its binaries are in
# the toolchain's bin directory, whose name is keyed on hack/tools/go.sum.
bin=${TOOLS_BIN:-$(bash "$repo/hack/tools.sh" --dir)}
kdir="$cache_root/kind-node-$K8S_VERSION-$(sha256sum "$repo/hack/tools/go.sum" | cut -c1-12)"
# Debian packages debootstrap fetched, reused by the next build.
debs=$cache_root/debootstrap-$DEBIAN_SUITE-debs

say() { echo "kind: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

engine_bin=$(bash "$repo/hack/engine.sh" --dir)
docker() { DOCKER_HOST=unix://${ENGINE_DIR:-$cluster_dir/engine}/docker.sock "$engine_bin/docker" "$@"; }
kind() {
	PATH="$engine_bin:$PATH" DOCKER_HOST=unix://${ENGINE_DIR:-$cluster_dir/engine}/docker.sock \
		KIND_EXPERIMENTAL_PROVIDER=docker "$bin/kind" "$@"
}

kind_module_dir() {
	(cd "$repo/hack/tools" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
}

# The node image's name: its recipe revision and every cache key it is made of.
node_image() {
	local key
	key=$(printf '%s\n' "$engine_bin" "$kdir" "$bin" "$NODE_REVISION" "$DEBIAN_SUITE" | sha256sum | cut -c1-12)
	echo "reconcilekit/kind-node:$K8S_VERSION-$key"
}

# build_images DIR: build the images kubeadm needs with the engine and save
# each as DIR/<n>.tar (docker archive).
build_images() {
	local out=$1 ctx list img short
	list=$("$bin/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null)
	say "kubeadm wants: $(echo $list)"
	ctx=$(mktemp -d)
	for img in $list; do
		short=${img##*/}
		short=${short%%:*}
		rm -rf "${ctx:?}"/*
		case $short in
		kube-apiserver | kube-controller-manager | kube-scheduler | etcd)
			cp "$bin/$short" "$ctx/$short"
			printf 'FROM scratch\nCOPY %s /usr/local/bin/%s\nENTRYPOINT ["/usr/local/bin/%s"]\n' "$short" "$short" "$short" >"$ctx/Dockerfile"
			;;
		coredns)
			cp "$bin/coredns" "$ctx/coredns"
			printf 'FROM scratch\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n' >"$ctx/Dockerfile"
			;;
		pause)
			cp "$bin/pause" "$ctx/pause"
			printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
			;;
		kube-proxy)
			# kube-proxy runs iptables: a small Debian root with it.
			build_kube_proxy_base
			cp "$bin/kube-proxy" "$ctx/kube-proxy"
			printf 'FROM reconcilekit/kube-proxy-base:%s\nCOPY kube-proxy /usr/local/bin/kube-proxy\nENTRYPOINT ["/usr/local/bin/kube-proxy"]\n' "$DEBIAN_SUITE" >"$ctx/Dockerfile"
			;;
		*) die "no recipe for image $img" ;;
		esac
		say "image $img"
		DOCKER_BUILDKIT=0 docker build -q -t "$img" "$ctx" >/dev/null
		docker save "$img" -o "$out/$short.tar"
	done
	rm -rf "$ctx"
}

build_kube_proxy_base() {
	docker image inspect "reconcilekit/kube-proxy-base:$DEBIAN_SUITE" >/dev/null 2>&1 && return 0
	local root
	root=$(mktemp -d "$kdir/kproot.XXXXXX")
	say "debootstrap $DEBIAN_SUITE for kube-proxy (iptables, conntrack)"
	mkdir -p "$debs"
	debootstrap --cache-dir="$debs" --variant=minbase --include=iptables,conntrack,ipset,kmod "$DEBIAN_SUITE" "$root" "$mirror" >"$kdir/debootstrap-kube-proxy.log" 2>&1 ||
		die "debootstrap failed; see $kdir/debootstrap-kube-proxy.log"
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	tar -C "$root" -c . | docker import - "reconcilekit/kube-proxy-base:$DEBIAN_SUITE" >/dev/null
	rm -rf "$root"
}

# import_images ROOTFS DIR: import DIR/*.tar into ROOTFS/var/lib/containerd,
# namespace k8s.io, content only (the node's CRI unpacks on first use), with
# a containerd of our own on a socket of our own.
import_images() {
	local root=$1 dir=$2 tmp pid t
	tmp=$(mktemp -d /tmp/rk-ctd.XXXXXX)
	cat >"$tmp/config.toml" <<-EOF
		version = 3
		root = "$root/var/lib/containerd"
		state = "$tmp/state"
		disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing", "io.containerd.podsandbox.controller.v1.podsandbox", "io.containerd.sandbox.controller.v1.shim"]
		[grpc]
		  address = "$tmp/c.sock"
		[ttrpc]
		  address = "$tmp/c.sock.ttrpc"
		[debug]
		  address = "$tmp/d.sock"
	EOF
	"$engine_bin/containerd" --config "$tmp/config.toml" >"$kdir/import-containerd.log" 2>&1 &
	pid=$!
	local deadline=$((SECONDS + 30))
	until "$engine_bin/ctr" --address "$tmp/c.sock" version >/dev/null 2>&1; do
		kill -0 $pid 2>/dev/null || die "containerd for the import exited; see $kdir/import-containerd.log"
		((SECONDS < deadline)) || die "containerd for the import did not start; see $kdir/import-containerd.log"
		sleep 0.5
	done
	for t in "$dir"/*.tar; do
		"$engine_bin/ctr" --address "$tmp/c.sock" --namespace=k8s.io images import \
			--label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests "$t" >&2
	done
	"$engine_bin/ctr" --address "$tmp/c.sock" --namespace=k8s.io images list -q >&2
	kill $pid
	wait $pid 2>/dev/null || true
	rm -rf "$tmp"
}

cmd_image() {
	bash "$repo/hack/tools.sh" >/dev/null
	bash "$repo/hack/engine.sh" up >/dev/null
	local image tarball
	image=$(node_image)
	if docker image inspect "$image" >/dev/null 2>&1; then
		say "node image $image is loaded"
		echo "$image"
		return 0
	fi
	tarball=$kdir/node-${image##*:}.tar
	mkdir -p "$kdir"
	if [[ ! -f "$tarball" ]]; then
		build_node_rootfs "$tarball"
	fi
	say "importing $tarball as $image"
	docker import \
		--change 'ENV container=docker' \
		--change 'STOPSIGNAL SIGRTMIN+3' \
		--change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
		"$tarball" "$image" >/dev/null
	echo "$image"
}

build_node_rootfs() {
	local tarball=$1 start=$SECONDS kindmod root images
	kindmod=$(kind_module_dir)
	[[ -d "$kindmod/images/base/files" ]] || die "kind module files not found (got '$kindmod')"
	root=$(mktemp -d "$kdir/rootfs.XXXXXX")
	images=$(mktemp -d "$kdir/images.XXXXXX")
	say "building the node root filesystem in $root (debootstrap $DEBIAN_SUITE, about a minute)"
	# What kind's base image installs, less storage (nfs, iscsi) and rootless
	# (fuse-overlayfs) extras.
	local pkgs=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,e2fsprogs
	mkdir -p "$debs"
	debootstrap --cache-dir="$debs" --variant=minbase --include="$pkgs" "$DEBIAN_SUITE" "$root" "$mirror" >"$kdir/debootstrap-node.log" 2>&1 ||
		die "debootstrap failed; see $kdir/debootstrap-node.log"
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

	local f=$kindmod/images/base/files
	install -m 0755 "$f"/usr/local/bin/* "$root/usr/local/bin/"
	mkdir -p "$root/kind/bin" "$root/LICENSES" "$root/etc/containerd" "$root/etc/systemd/system/kubelet.service.d" "$root/kind/manifests"
	install -m 0644 "$f"/kind/README.txt "$root/kind/"
	install -m 0755 "$f"/kind/bin/* "$root/kind/bin/"
	install -m 0644 "$f"/etc/crictl.yaml "$root/etc/"
	install -m 0644 "$f"/etc/containerd/config.toml "$root/etc/containerd/"
	install -m 0644 "$f"/etc/default/kubelet "$root/etc/default/"
	install -m 0644 "$f"/etc/sysctl.d/* "$root/etc/sysctl.d/"
	install -m 0644 "$f"/etc/systemd/system/*.service "$f"/etc/systemd/system/*.slice "$root/etc/systemd/system/"
	install -m 0644 "$f"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"
	chmod 0755 "$root/kind" "$root/kind/bin"
	(
		cd "$root"
		find lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
		rm -f lib/systemd/system/multi-user.target.wants/* etc/systemd/system/*.wants/* \
			lib/systemd/system/local-fs.target.wants/* lib/systemd/system/sockets.target.wants/*udev* \
			lib/systemd/system/sockets.target.wants/*initctl* lib/systemd/system/basic.target.wants/*
		echo "ReadKMsg=no" >>etc/systemd/journald.conf
		ln -sf /usr/lib/systemd/systemd sbin/init
	)
	chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >&2
	chroot "$root" systemctl mask systemd-binfmt.service >&2
	mkdir -p "$root/etc/kubernetes/manifests"

	# The engine's containerd and runc, and the node's binaries.
	install -m 0755 "$engine_bin"/{containerd,containerd-shim-runc-v2,ctr} "$root/usr/local/bin/"
	install -m 0755 "$engine_bin/runc" "$root/usr/local/sbin/runc"
	install -m 0755 "$bin/crictl" "$root/usr/local/bin/"
	mkdir -p "$root/opt/cni/bin"
	local p
	for p in ptp loopback host-local portmap; do install -m 0755 "$bin/cni-$p" "$root/opt/cni/bin/$p"; done
	install -m 0755 "$bin"/{kubelet,kubeadm} "$bin/kubectl" "$root/usr/bin/"
	chroot "$root" sh -c 'ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" | jq "del(.process.rlimits)" > /etc/containerd/cri-base.json'
	[[ -s "$root/etc/containerd/cri-base.json" ]] || die "cri-base.json is empty"

	# containerd on this host: cgroupfs (cgroup v1), and no lowering of
	# oom_score_adj (that needs CAP_SYS_RESOURCE, which no process here has).
	local pause
	pause=$("$bin/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null | grep /pause:)
	sed -i \
		-e 's/SystemdCgroup = true/SystemdCgroup = false/' \
		-e 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' \
		-e "s|sandbox_image = .*|sandbox_image = \"$pause\"|" \
		"$root/etc/containerd/config.toml"
	grep -q 'restrict_oom_score_adj = true' "$root/etc/containerd/config.toml" || die "containerd config patch failed"

	# Pod networking without kindnetd: ptp for the one node's pod range
	# (kube-controller-manager gives the first node 10.244.0.0/24).
	mkdir -p "$root/etc/cni/net.d"
	cat >"$root/etc/cni/net.d/10-ptp.conflist" <<-'EOF'
		{
		  "cniVersion": "1.0.0",
		  "name": "kind-ptp",
		  "plugins": [
		    {
		      "type": "ptp",
		      "ipMasq": false,
		      "mtu": 1500,
		      "ipam": {
		        "type": "host-local",
		        "dataDir": "/run/cni-ipam-state",
		        "routes": [{"dst": "0.0.0.0/0"}],
		        "ranges": [[{"subnet": "10.244.0.0/24"}]]
		      }
		    },
		    {"type": "portmap", "capabilities": {"portMappings": true}}
		  ]
		}
	EOF
	cat >"$root/kind/manifests/default-storage.yaml" <<-'EOF'
		apiVersion: storage.k8s.io/v1
		kind: StorageClass
		metadata:
		  name: standard
		  annotations:
		    storageclass.kubernetes.io/is-default-class: "true"
		provisioner: kubernetes.io/host-path
	EOF
	echo "$K8S_VERSION" >"$root/kind/version"

	# kubeadm patches (InitConfiguration.patches in the cluster config below):
	# the control plane's CPU requests (250m+200m+100m+100m by default) would
	# leave a two-core node too little to schedule the suite's WebApps. Requests
	# only: nothing limits what the components use.
	mkdir -p "$root/kind/patches"
	local c
	for c in kube-apiserver kube-controller-manager kube-scheduler etcd; do
		cat >"$root/kind/patches/$c+strategic.yaml" <<-EOF
			spec:
			  containers:
			  - name: $c
			    resources:
			      requests:
			        cpu: 50m
		EOF
	done

	build_images "$images"
	import_images "$root" "$images"
	rm -rf "$images"

	say "writing $tarball"
	tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
	mv "$tarball.tmp" "$tarball"
	rm -rf "$root"
	# Root filesystems of earlier revisions are not needed any more.
	find "$kdir" -maxdepth 1 -name 'node-*.tar' ! -path "$tarball" -delete
	say "node root filesystem built in $((SECONDS - start))s"
}

exists() { kind get clusters 2>/dev/null | grep -qx "$name"; }

kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" --cache-dir "$cluster_dir/kubectl-cache" "$@"; }

# write_config: the cluster configuration (no kindnetd, the kubelet on
# cgroupfs, the control plane's CPU requests patched); prints its path.
write_config() {
	local config=$cluster_dir/$name.kind.yaml
	mkdir -p "$cluster_dir"
	cat >"$config" <<-EOF
		kind: Cluster
		apiVersion: kind.x-k8s.io/v1alpha4
		networking:
		  apiServerAddress: 127.0.0.1
		  disableDefaultCNI: true
		  podSubnet: 10.244.0.0/16
		  serviceSubnet: 10.96.0.0/16
		nodes:
		- role: control-plane
		kubeadmConfigPatches:
		- |
		  kind: KubeletConfiguration
		  cgroupDriver: cgroupfs
		  failCgroupV1: false
		- |
		  kind: InitConfiguration
		  patches:
		    directory: /kind/patches
	EOF
	echo "$config"
}

cmd_up() {
	local image start=$SECONDS
	image=$(cmd_image | tail -n 1)
	mkdir -p "$cluster_dir"
	if exists; then
		say "cluster $name exists"
		kind export kubeconfig --name "$name" --kubeconfig "$kubeconfig" >&2
	else
		local config
		config=$(write_config)
		say "creating cluster $name with $image"
		kind create cluster --name "$name" --image "$image" --config "$config" \
			--kubeconfig "$kubeconfig" --retain --wait 0s >&2 ||
			die "kind create cluster failed; the node is kept for inspection (docker exec $name-control-plane journalctl); clean up with: $0 down"
		# CoreDNS answers for the cluster only: nothing is forwarded out of the
		# node (no upstream is reachable, and none may be contacted).
		kubectl -n kube-system get configmap coredns -o yaml |
			sed -e '/^\s*forward \. /,/^\s*}/d' -e '/^\s*forward \. .*[^{]$/d' -e '/^\s*loop$/d' |
			kubectl apply -f - >&2
		# One CoreDNS replica is enough for one node (and its 100m request).
		kubectl -n kube-system scale deployment coredns --replicas=1 >&2
		kubectl -n kube-system rollout restart deployment coredns >&2
	fi
	kubectl wait --for=condition=Ready node --all --timeout=180s >&2
	kubectl wait --for=create serviceaccount/default --namespace default --timeout=180s >&2
	kubectl -n kube-system rollout status deployment coredns --timeout=180s >&2
	say "cluster $name is ready after $((SECONDS - start))s: $(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
	echo "$kubeconfig"
}

cmd_down() {
	if [[ -x "$bin/kind" ]] && [[ -S "${ENGINE_DIR:-$cluster_dir/engine}/docker.sock" ]] && exists; then
		say "deleting cluster $name"
		kind delete cluster --name "$name" --kubeconfig "$kubeconfig" >&2
	else
		say "cluster $name does not exist"
	fi
	rm -f "$kubeconfig" "$cluster_dir/$name.kind.yaml"
	[[ "${KEEP_ENGINE:-}" == 1 ]] && return 0
	# The engine is shared by the clusters of this checkout (make kind-up's,
	# the e2e suite's): it stops with the last one.
	local others=""
	if [[ -x "$bin/kind" ]] && [[ -S "${ENGINE_DIR:-$cluster_dir/engine}/docker.sock" ]]; then
		others=$(kind get clusters 2>/dev/null | grep -v '^No kind clusters' || true)
	fi
	if [[ -n "$others" ]]; then
		say "the engine keeps running for cluster(s): $(echo $others)"
	else
		bash "$repo/hack/engine.sh" down
	fi
}

cmd_logs() {
	local dest=${1:-}
	[[ -n "$dest" ]] || die "usage: $0 logs DIR"
	exists || die "cluster $name does not exist"
	mkdir -p "$dest"
	kind export logs --name "$name" "$dest/$name" >&2
	say "logs of cluster $name exported to $dest/$name"
}

cmd_load() {
	(($#)) || die "usage: $0 load IMAGE..."
	exists || die "cluster $name does not exist"
	local i
	for i in "$@"; do kind load docker-image --name "$name" "$i" >&2; done
}

cmd_kubeconfig() {
	[[ -f "$kubeconfig" ]] || die "cluster $name is not running; start it with: $0 up"
	echo "$kubeconfig"
}

case "${1:-}" in
image)
	# Leave the engine as found: make test's kind-build must not leave a
	# daemon behind when the other chain fails before the kind suite runs.
	if [[ -S "${ENGINE_DIR:-$cluster_dir/engine}/docker.sock" ]]; then
		cmd_image
	else
		cmd_image
		bash "$repo/hack/engine.sh" down
	fi
	;;
up) cmd_up ;;
down) cmd_down ;;
kubeconfig) cmd_kubeconfig ;;
config) write_config ;;
logs) cmd_logs "${2:-}" ;;
load)
	shift
	cmd_load "$@"
	;;
*)
	sed -n '/^# Usage:/,/^# Environment:/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
