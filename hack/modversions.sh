#!/usr/bin/env bash
# Fails when two of the given Go modules build one dependency at different
# versions, naming the module, the versions and the modules that pick each.
#
# Every module of this repository has its own go.mod, so each resolves its own
# versions; where two disagree on a module they both compile (packaging's helm
# pulled golang.org/x/net v0.62.0 while the library had v0.57.0), every
# package above it compiles twice, once per version: in a cold make test that
# was client-go, controller-runtime and their dependencies a second time for
# packaging alone. Only the modules whose packages a module's build and
# tests use are compared (go list -deps -test, with the e2e tag), not its
# whole module graph. A module with a `tool` block (hack/tools, the
# toolchain hack/tools.sh builds) is compared by its tools' packages: the
# toolchain compiles k8s.io/api, client-go, helm, ... before vet, and vet and
# the tests reuse them only at the same versions. Fix a report with `go get
# MODULE@VERSION` (the toolchain's, or the higher one) in the modules on the
# other one, then `go mod tidy` in each.
#
# Usage: hack/modversions.sh DIR...
set -euo pipefail

export GOWORK=off
list=$(mktemp)
trap 'rm -f "$list"' EXIT
# Accepted differences, each with why it costs little:
# sigs.k8s.io/controller-runtime: the library pins its own release; the
# toolchain's helm builds 7 of its packages at the version kwok requires.
allow=" sigs.k8s.io/controller-runtime "
for dir in "$@"; do
	if grep -q '^tool' "$dir/go.mod"; then
		patterns=(tool ./...)
	else
		patterns=(-test ./...)
	fi
	# A module replaced by another version of itself (hack/tools pins the
	# Kubernetes staging modules so) builds at the replacement's version.
	(cd "$dir" && go list -tags e2e -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{with .Replace}}{{.Version}}{{end}}{{end}}{{end}}' "${patterns[@]}") |
		awk -v allow="$allow" 'NF && index(allow, " " $1 " ") == 0 { print $1, (NF == 3 ? $3 : $2) }' |
		sort -u | sed "s|\$| $dir|" >>"$list"
done
# path version dir -> one line per path with more than one version.
report=$(sort -k1,1 -k2,2 "$list" | awk '
	{ key = $1 " " $2; if (!(key in dirs)) { versions[$1] = versions[$1] " " $2 }; dirs[key] = dirs[key] " " $3 }
	END {
		for (p in versions) {
			n = split(versions[p], vs, " ")
			if (n < 2) continue
			line = p ":"
			for (i = 1; i <= n; i++) line = line " " vs[i] " (" substr(dirs[p " " vs[i]], 2) ")"
			print line
		}
	}' | sort)
if [[ -n "$report" ]]; then
	echo "modversions: these dependencies build at more than one version across the modules (each compiles once per version):" >&2
	echo "$report" >&2
	exit 1
fi
echo "modversions: one version of every dependency across: $*"
