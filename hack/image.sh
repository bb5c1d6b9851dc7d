#!/usr/bin/env bash
# Builds the images the kind cluster runs, offline, with the private engine of
# hack/engine.sh, and loads them into the kind cluster of hack/kind.sh.
#
#   - the WebApp operator ($IMG, default reconcilekit/webapp-operator:dev):
#     the layout of examples/webapp/Dockerfile's image (a static binary at
#     /webapp-operator, user 65532:65532, no shell), but FROM scratch with the
#     binary compiled on this host, because neither golang:1.26 nor
#     gcr.io/distroless/static can be pulled here. /etc/passwd and /etc/group
#     name the nonroot user as distroless does.
#   - a tiny HTTP server for the WebApps' pods (hack/web, port
#     8080), tagged $WEB_IMG (default reconcilekit/web:dev) and with the names
#     the sample WebApp (registry.example.com/web:v2.1.0) and the e2e suite's
#     WebApps ask for ($WEB_ALIASES), so that their pods really run. The
#     same binary is the e2e suite's in-cluster client (`web -get URL`, in
#     Jobs: e2e/kind_test.go), since the image has no shell and no curl.
#
# Usage:
#   hack/image.sh build   build both images into the engine
#   hack/image.sh load    build, then `kind load` them into the cluster
#   hack/image.sh stand-ins  tag stand-ins for the base images the repo's
#                        Dockerfiles start from (golang:1.26: a debootstrapped
#                        Debian with this host's Go; gcr.io/distroless/static:
#                        nonroot: FROM scratch with its nonroot user), which
#                        no registry serves here, so that `docker build` of
#                        those Dockerfiles runs on the engine as on a laptop
#                        (make test-kind-docker)
#
# Environment: IMG, WEB_IMG, WEB_ALIASES, KIND_CLUSTER_NAME (as hack/kind.sh),
# CLUSTER_DIR.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
img=${IMG:-reconcilekit/webapp-operator:dev}
web_img=${WEB_IMG:-reconcilekit/web:dev}
web_aliases=${WEB_ALIASES:-registry.example.com/web:v2.1.0 registry.example.com/web:v1.0.0 registry.example.com/web:v2.2.0 registry.example.com/shop:v1.0.0}
name=${KIND_CLUSTER_NAME:-${CLUSTER_NAME:-reconcilekit-kind}}
cluster_dir=${CLUSTER_DIR:-$repo/.cluster}

say() { echo "image: $*" >&2; }

engine_bin=$(bash "$repo/hack/engine.sh" --dir)
tools_bin=$(bash "$repo/hack/tools.sh" | tail -n 1)
export DOCKER_HOST=unix://${ENGINE_DIR:-$cluster_dir/engine}/docker.sock
docker() { "$engine_bin/docker" "$@"; }

# scratch_image TAG... : build a FROM-scratch image from $ctx/bin (the
# entrypoint, copied to /$entry) for user 65532.
scratch_image() {
	local ctx=$1 entry=$2
	shift 2
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"
	cat >"$ctx/Dockerfile" <<-EOF
		FROM scratch
		COPY passwd /etc/passwd
		COPY group /etc/group
		COPY bin /$entry
		USER 65532:65532
		ENTRYPOINT ["/$entry"]
	EOF
	local tags=() t
	for t in "$@"; do tags+=(-t "$t"); done
	DOCKER_BUILDKIT=0 docker build -q "${tags[@]}" "$ctx" >/dev/null
}

cmd_build() {
	bash "$repo/hack/engine.sh" up >/dev/null
	local ctx start=$SECONDS
	ctx=$(mktemp -d)
	say "building $img"
	# Without -trimpath, and cgo off as the Makefile sets it for vet and the
	# tests: the same build configuration, so in make test every package of the
	# operator is already compiled when this runs.
	(cd "$repo/examples" && GOWORK=off CGO_ENABLED=0 GOOS=linux go build -ldflags="-s -w" -o "$ctx/bin" ./webapp)
	scratch_image "$ctx" webapp-operator "$img"
	rm -rf "${ctx:?}"/*
	say "building $web_img ($web_aliases)"
	(cd "$repo/hack/web" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$ctx/bin" .)
	# shellcheck disable=SC2086 # a list of names
	scratch_image "$ctx" web "$web_img" $web_aliases
	rm -rf "$ctx"
	say "images built in $((SECONDS - start))s"
}

cmd_stand_ins() {
	bash "$repo/hack/engine.sh" up >/dev/null
	local ctx root tarball cache_root mirror debs goroot gover
	ctx=$(mktemp -d)
	if ! docker image inspect gcr.io/distroless/static:nonroot >/dev/null 2>&1; then
		say "stand-in gcr.io/distroless/static:nonroot"
		printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/passwd"
		printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"
		printf 'FROM scratch\nCOPY passwd /etc/passwd\nCOPY group /etc/group\nUSER 65532:65532\n' >"$ctx/Dockerfile"
		DOCKER_BUILDKIT=0 docker build -q -t gcr.io/distroless/static:nonroot "$ctx" >/dev/null
	fi
	rm -rf "$ctx"
	goroot=$(go env GOROOT)
	gover=$(go env GOVERSION)
	if ! docker image inspect "reconcilekit/golang-stand-in:$gover" >/dev/null 2>&1; then
		cache_root=${RECONCILEKIT_CACHE:-$HOME/.cache/reconcilekit}
		mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
		debs=$cache_root/debootstrap-bookworm-debs
		tarball=$cache_root/golang-stand-in-$gover.tar
		if [[ ! -f "$tarball" ]]; then
			say "stand-in golang:1.26: debootstrap bookworm and $gover"
			command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
			root=$(mktemp -d "$cache_root/golang-root.XXXXXX")
			mkdir -p "$debs"
			debootstrap --cache-dir="$debs" --variant=minbase --include=ca-certificates,git bookworm "$root" "$mirror" >"$root.log" 2>&1 ||
				{ say "debootstrap failed; see $root.log"; exit 1; }
			rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
			mkdir -p "$root/usr/local/go" "$root/go"
			cp -a "$goroot/." "$root/usr/local/go/"
			tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
			mv "$tarball.tmp" "$tarball"
			rm -rf "$root" "$root.log"
		fi
		docker import \
			--change 'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'ENV GOPATH=/go' --change 'ENV GOTOOLCHAIN=local' --change 'WORKDIR /go' \
			"$tarball" "reconcilekit/golang-stand-in:$gover" >/dev/null
	fi
	# The host's trust store on top: the module proxy is reached the way
	# this host reaches it (here through a TLS proxy whose CA only the host
	# trusts; a laptop's golang:1.26 has the public CAs it needs).
	ctx=$(mktemp -d)
	cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
	printf 'FROM reconcilekit/golang-stand-in:%s\nCOPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\n' "$gover" >"$ctx/Dockerfile"
	DOCKER_BUILDKIT=0 docker build -q -t golang:1.26 "$ctx" >/dev/null
	rm -rf "$ctx"
	say "stand-ins tagged: golang:1.26 ($gover), gcr.io/distroless/static:nonroot"
}

cmd_load() {
	cmd_build
	local i
	for i in "$img" "$web_img" $web_aliases; do
		say "kind load $i"
		PATH="$engine_bin:$PATH" "$tools_bin/kind" load docker-image --name "$name" "$i" >&2
	done
}

case "${1:-}" in
build) cmd_build ;;
load) cmd_load ;;
stand-ins) cmd_stand_ins ;;
*)
	sed -n '/^# Usage:/,/^# Environment:/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
	;;
esac
