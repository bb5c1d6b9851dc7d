#!/usr/bin/env bash
# Compares the exported API of the library module with the committed snapshot,
# so that an incompatible change (a removed or renamed name, a changed
# signature) cannot land without the snapshot and CHANGELOG.md saying so.
# docs/compatibility.md ("The API check") explains the policy.
#
# The snapshot is apidiff's export data of the whole module (apidiff -m -w);
# apidiff skips internal/ packages. apidiff is pinned in hack/apidifftool and
# built into the toolchain cache by hack/tools.sh.
#
# Usage: hack/apicheck.sh check   fail on an incompatible change (make lint)
#        hack/apicheck.sh write   rewrite the snapshot (make api-snapshot)
#
# Environment (for the script's own test, internal/apicheck):
#   APICHECK_MODULE_DIR  the module to check (default: the repository root)
#   APICHECK_SNAPSHOT    the snapshot file (default: hack/api/reconcilekit.export)
#   APIDIFF              the apidiff binary (default: built by hack/tools.sh)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module_dir=${APICHECK_MODULE_DIR:-$(dirname "$here")}
snapshot=${APICHECK_SNAPSHOT:-$here/api/reconcilekit.export}
apidiff=${APIDIFF:-}
if [[ -z "$apidiff" ]]; then
	apidiff="$(TOOLS_ONLY=apidiff bash "$here/tools.sh" | tail -n 1)/apidiff"
fi

# The module is read with its own go.mod, never a go.work's mix.
export GOWORK=off
cd "$module_dir"
module=$(go list -m)

case "${1:-}" in
write)
	mkdir -p "$(dirname "$snapshot")"
	"$apidiff" -m -w "$snapshot.tmp" "$module" 2> >(grep -v '^Ignoring internal package' >&2)
	mv "$snapshot.tmp" "$snapshot"
	echo "apicheck: wrote the API snapshot of $module to $snapshot"
	;;
check)
	if [[ ! -f "$snapshot" ]]; then
		echo "apicheck: no API snapshot at $snapshot; run 'make api-snapshot' and commit it" >&2
		exit 1
	fi
	# apidiff lists a changed method of a generic type once per instance.
	report=$("$apidiff" -m -incompatible "$snapshot" "$module" 2> >(grep -v '^Ignoring internal package' >&2) | awk '!seen[$0]++')
	if [[ -n "$report" ]]; then
		cat >&2 <<EOF
apicheck: incompatible change to the exported API of $module
(compared with the snapshot $snapshot):

$report

If the change is intended: run 'make api-snapshot', add a line to CHANGELOG.md
(under [Unreleased]; a rename goes in its "Renamed" table) saying how to
migrate, and commit both with the change (docs/compatibility.md). Otherwise
keep the old API: add instead of change, deprecate instead of remove.
EOF
		exit 1
	fi
	echo "apicheck: the exported API of $module is compatible with $snapshot"
	;;
*)
	echo "usage: $0 check|write" >&2
	exit 2
	;;
esac
