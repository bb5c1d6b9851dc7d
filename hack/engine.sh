#!/usr/bin/env bash
# A private container engine for the kind cluster, built from source.
#
# Nothing prebuilt is downloaded: dockerd and docker-proxy are built from
# github.com/moby/moby/v2 (whose privileged containers get only the
# capabilities of the bounding set, which this sandbox's lacks CAP_SYS_RESOURCE
# of; Debian's dockerd 20.10 fails there), containerd, its runc shim and ctr
# from github.com/containerd/containerd/v2 (both pinned by hack/enginetools,
# one go build: dockerd imports most of containerd, whose packages then
# compile once), runc from github.com/opencontainers/runc with cgo and the
# seccomp build tag, and the docker CLI from github.com/docker/cli, all
# through the Go module proxy, into a cache outside the checkout keyed by
# their versions and hack/enginetools/go.sum. The same containerd, shim and runc go
# into the kind node image (hack/kind.sh). Debian packages it needs
# (libseccomp-dev and pkg-config to build runc, debootstrap for the node
# image) are installed with apt-get when missing.
#
# The daemon is ours alone: its data root, exec root, pidfile, socket and log
# are under $ENGINE_DIR (default <repo>/.cluster/engine), it runs its own
# containerd under that exec root, and it never touches a host daemon's state
# or the host's firewall: iptables, ip6tables and ip forwarding are off, there
# is no default bridge, and published ports are served by docker-proxy on the
# address given (kind publishes the apiserver on 127.0.0.1). Networks it
# creates take addresses from 10.213.0.0/16.
#
# Usage:
#   hack/engine.sh build   build what is missing; the last line is the bin dir
#   hack/engine.sh up      build, then start the daemon unless it runs; the last
#                          line is the DOCKER_HOST to use
#   hack/engine.sh down    stop the daemon (and its containerd) if it runs
#   hack/engine.sh env     print `export DOCKER_HOST=... PATH=...` lines
#   hack/engine.sh --dir   print the bin dir, build nothing
#
# Environment:
#   RECONCILEKIT_CACHE  cache root (default: $HOME/.cache/reconcilekit)
#   ENGINE_DIR          daemon state (default: <repo>/.cluster/engine)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)

# moby's and containerd's versions are hack/enginetools/go.mod's.
modver() { awk -v m="$1" '$1 == m {print $2}' "$repo/hack/enginetools/go.mod"; }
MOBY_VERSION=$(modver github.com/moby/moby/v2)
CONTAINERD_VERSION=$(modver github.com/containerd/containerd/v2)
RUNC_VERSION=v1.5.3
DOCKER_CLI_VERSION=v29.10.0

cache_root=${RECONCILEKIT_CACHE:-$HOME/.cache/reconcilekit}
sum=$(sha256sum "$repo/hack/enginetools/go.sum" | cut -c1-12)
bin="$cache_root/engine-moby-$MOBY_VERSION-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-cli-$DOCKER_CLI_VERSION-$sum/bin"
state=${ENGINE_DIR:-$repo/.cluster/engine}
sock=$state/docker.sock
pidfile=$state/docker.pid

say() { echo "engine: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

# apt_need PKG...: install the Debian packages that are not installed yet.
apt_need() {
	local pkg missing=()
	for pkg in "$@"; do
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
	done
	((${#missing[@]})) || return 0
	say "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# make test's other chain may be installing packages too: wait for the lock.
	apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >&2 ||
		{ apt-get -o DPkg::Lock::Timeout=600 update >&2 && apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >&2; }
}

# gobuild NAME REF [TAGS] [CGO]: go install REF (module@version) as $bin/NAME.
gobuild() {
	local name=$1 ref=$2 tags=${3:-} cgo=${4:-0}
	[[ -x "$bin/$name" ]] && return 0
	say "building $name ($ref)"
	local tmp start=$SECONDS
	tmp=$(mktemp -d)
	GOBIN="$tmp" CGO_ENABLED=$cgo GOFLAGS=-buildvcs=false \
		go install -trimpath -tags "$tags" -ldflags "-s -w" "$ref" >&2
	mv "$tmp/$(basename "${ref%@*}")" "$bin/$name"
	rm -rf "$tmp"
	say "built $name in $((SECONDS - start))s"
}

# daemons: dockerd, docker-proxy, containerd, containerd-shim-runc-v2 and
# ctr in one go build from hack/enginetools, without the snapshotters we do
# not use (aufs, zfs, btrfs, devmapper: overlayfs serves).
build_daemons() {
	local name missing=()
	for name in dockerd docker-proxy containerd containerd-shim-runc-v2 ctr; do
		[[ -x "$bin/$name" ]] || missing+=("$name")
	done
	((${#missing[@]})) || return 0
	say "building ${missing[*]} (moby $MOBY_VERSION, containerd $CONTAINERD_VERSION)"
	local tmp pkgs=() start=$SECONDS
	for name in "${missing[@]}"; do
		case $name in
		dockerd | docker-proxy) pkgs+=("github.com/moby/moby/v2/cmd/$name") ;;
		*) pkgs+=("github.com/containerd/containerd/v2/cmd/$name") ;;
		esac
	done
	tmp=$(mktemp -d)
	(cd "$repo/hack/enginetools" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOWORK=off \
		go build -trimpath -tags "no_aufs no_zfs no_btrfs no_devmapper" -ldflags "-s -w" -o "$tmp/" "${pkgs[@]}") >&2
	for name in "${missing[@]}"; do mv "$tmp/$name" "$bin/$name"; done
	rm -rf "$tmp"
	say "built ${missing[*]} in $((SECONDS - start))s"
}

cmd_build() {
	mkdir -p "$bin"
	apt_need libseccomp-dev pkg-config debootstrap
	build_daemons
	# Without the seccomp tag runc refuses every container that has a
	# seccomp profile ("config provided but seccomp not supported").
	gobuild runc "github.com/opencontainers/runc@$RUNC_VERSION" seccomp 1
	build_cli
	echo "$bin"
}

# The docker CLI's repository has no go.mod: its module requirements are in
# vendor.mod, so a go build of github.com/docker/cli@VERSION would pick the
# oldest language version and no requirements. As docker's own build does, a
# copy of the module source gets vendor.mod as its go.mod (and vendor.sum as
# go.sum), then `go build ./cmd/docker` there. One pin is moved: the
# swarmkit release vendor.mod names (v2.1.3) is not on the module proxy; v2.1.2
# is, and the CLI builds with it.
build_cli() {
	[[ -x "$bin/docker" ]] && return 0
	local ref="github.com/docker/cli@$DOCKER_CLI_VERSION+incompatible"
	say "building docker ($ref)"
	local src tmp start=$SECONDS
	src=$(cd / && GOWORK=off GOFLAGS=-mod=mod go mod download -json "$ref" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -f "$src/vendor.mod" ]] || die "no vendor.mod in $ref (got '$src')"
	tmp=$(mktemp -d)
	cp -r "$src/." "$tmp/"
	chmod -R u+w "$tmp"
	mv "$tmp/vendor.mod" "$tmp/go.mod"
	[[ -f "$tmp/vendor.sum" ]] && mv "$tmp/vendor.sum" "$tmp/go.sum"
	sed -i 's|^\(\s*github.com/moby/swarmkit/v2\) v2.1.3$|\1 v2.1.2|' "$tmp/go.mod"
	(cd "$tmp" && CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" GOWORK=off \
		go build -trimpath -ldflags "-s -w -X github.com/docker/cli/cli/version.Version=${DOCKER_CLI_VERSION#v}" \
		-o "$bin/docker.tmp" ./cmd/docker) >&2
	mv "$bin/docker.tmp" "$bin/docker"
	rm -rf "$tmp"
	say "built docker in $((SECONDS - start))s"
}

docker() { DOCKER_HOST=unix://$sock "$bin/docker" "$@"; }

running() {
	[[ -S "$sock" && -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null &&
		docker version >/dev/null 2>&1
}

cmd_up() {
	cmd_build >/dev/null
	mkdir -p "$state"
	if running; then
		say "dockerd is already running (pid $(cat "$pidfile"))"
		echo "unix://$sock"
		return 0
	fi
	local config=$state/daemon.json
	cat >"$config" <<-EOF
		{
		  "data-root": "$state/data",
		  "exec-root": "$state/exec",
		  "pidfile": "$pidfile",
		  "hosts": ["unix://$sock"],
		  "bridge": "none",
		  "iptables": false,
		  "ip6tables": false,
		  "ip-forward": false,
		  "ip-masq": false,
		  "userland-proxy": true,
		  "userland-proxy-path": "$bin/docker-proxy",
		  "storage-driver": "overlay2",
		  "exec-opts": ["native.cgroupdriver=cgroupfs"],
		  "default-runtime": "rk-runc",
		  "runtimes": {"rk-runc": {"path": "$bin/runc"}},
		  "default-address-pools": [{"base": "10.213.0.0/16", "size": 24}],
		  "features": {"containerd-snapshotter": false}
		}
	EOF
	say "starting dockerd (state in $state, log $state/dockerd.log)"
	# PATH: dockerd starts the containerd and shim next to it.
	PATH="$bin:$PATH" setsid "$bin/dockerd" --config-file "$config" >"$state/dockerd.log" 2>&1 </dev/null &
	local pid=$! deadline=$((SECONDS + 60))
	until docker version >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || {
			tail -n 20 "$state/dockerd.log" >&2
			die "dockerd exited; see $state/dockerd.log"
		}
		((SECONDS < deadline)) || die "dockerd did not answer within 60s; see $state/dockerd.log"
		sleep 0.5
	done
	say "dockerd is running (pid $pid)"
	echo "unix://$sock"
}

# pids_of_engine: the daemon and every containerd/shim it started (their
# command lines name our exec root or socket).
pids_of_engine() {
	local pattern
	pattern=$(printf '%s' "$state/" | sed 's/[][\.*^$+?(){}|]/\\&/g')
	pgrep -f -- "$pattern" || true
}

cmd_down() {
	local pid
	if [[ -f "$pidfile" ]] && pid=$(cat "$pidfile") && kill -0 "$pid" 2>/dev/null; then
		say "stopping dockerd (pid $pid)"
		kill -TERM "$pid"
		local deadline=$((SECONDS + 60))
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.5; done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
	else
		say "dockerd is not running"
	fi
	local left
	left=$(pids_of_engine)
	if [[ -n "$left" ]]; then
		say "stopping leftover processes: $(echo $left)"
		kill -TERM $left 2>/dev/null || true
		sleep 2
		left=$(pids_of_engine)
		[[ -z "$left" ]] || kill -KILL $left 2>/dev/null || true
	fi
	# Mounts a killed daemon may leave behind under our state dir only.
	local m
	{ grep -o " $state/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -f "$pidfile" "$sock"
}

cmd_env() {
	echo "export DOCKER_HOST=unix://$sock"
	echo "export PATH=$bin:\$PATH"
}

case "${1:-}" in
build) cmd_build ;;
up) cmd_up ;;
down) cmd_down ;;
env) cmd_env ;;
--dir) echo "$bin" ;;
*)
	sed -n '/^# Usage:/,/^# Environment:/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
