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
# whole module graph. Fix a report with `go get MODULE@VERSION` (the higher
# one) in the modules on the lower one, then `go mod tidy` in each.
#
# Usage: hack/modversions.sh DIR...
set -euo pipefail

export GOWORK=off
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for dir in "$@"; do
	(cd "$dir" && go list -tags e2e -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' ./...) |
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
