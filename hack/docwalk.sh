#!/usr/bin/env bash
# Follows a docs page the way a reader does, and fails where a reader would:
# every ```sh block runs, in page order, in one bash session; every ```go or
# ```yaml block that names a file (first line "// file: PATH" or
# "# file: PATH") is written to that file, blocks for the same file joined
# with a blank line. A file block for a file that already exists when the
# block is reached (a command generated it, like controller-gen's role.yaml)
# is not written: the file must equal the block, so the page shows what the
# reader really gets. Blocks without a file line are illustrations.
#
# Usage:
#   hack/docwalk.sh PAGE.md     walk the page (make test-docs walks docs/getting-started.md)
#   hack/docwalk.sh -n PAGE.md  print the script the walk would run
#
# The walk runs in a throwaway HOME, where ~/src/reconcilekit is this checkout;
# the Go caches and the toolchain cache stay the real ones, so nothing is
# rebuilt. Its local cluster has a name and a state directory of its own
# (CLUSTER_NAME, CLUSTER_DIR), so a `make demo` cluster is left alone; it is
# deleted when the walk ends, pass or fail, and every process the page
# started in the background is stopped. On failure the walk directory is
# kept and its path printed.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)

dry_run=
if [[ "${1:-}" == -n ]]; then
	dry_run=1
	shift
fi
[[ $# -eq 1 && -f "$1" ]] || {
	sed -n '/^# Usage:/,/^# The walk/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
page=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")

say() { echo "docwalk: $*" >&2; }

# render turns the page into a bash script: sh blocks verbatim, file blocks
# as calls to docwalk_file with the block on stdin.
render() {
	awk -v page="$page" '
	function flush() {
		if (lang == "sh") {
			printf "docwalk_step %s\n", quote(page ":" start)
			printf "%s", body
		} else if (file != "") {
			printf "docwalk_file %s <<'"'"'DOCWALK_EOF'"'"'\n%sDOCWALK_EOF\n", quote(file), body
		}
	}
	function quote(s) { gsub(/'"'"'/, "'"'"'\\'"'"''"'"'", s); return "'"'"'" s "'"'"'" }
	!inblock && /^```[a-z]+$/ { inblock = 1; lang = substr($0, 4); body = ""; file = ""; first = 1; start = NR; next }
	inblock && /^```$/ { flush(); inblock = 0; next }
	inblock {
		if (first && ((lang == "go" && $0 ~ /^\/\/ file: /) || (lang == "yaml" && $0 ~ /^# file: /))) {
			file = $0; sub(/^(\/\/|#) file: /, "", file)
		} else {
			body = body $0 "\n"
		}
		first = 0
		next
	}
	END { if (inblock) { print "page ends inside a code block" > "/dev/stderr"; exit 1 } }
	' "$page"
}

if [[ -n "$dry_run" ]]; then
	render
	exit 0
fi

script=$(render)

walk=$(mktemp -d "${TMPDIR:-/tmp}/docwalk.XXXXXX")
home=$walk/home
mkdir -p "$home/src"
ln -s "$repo" "$home/src/reconcilekit"

# Keep the real Go environment and toolchain cache under the throwaway HOME.
for v in GOPATH GOMODCACHE GOCACHE GOENV GOPROXY GOSUMDB GONOSUMDB GOPRIVATE GOFLAGS GOTOOLCHAIN; do
	export "$v=$(go env "$v")"
done
export RECONCILEKIT_CACHE=${RECONCILEKIT_CACHE:-$HOME/.cache/reconcilekit}
export CLUSTER_NAME=docwalk CLUSTER_DIR=$walk/cluster
unset KUBECONFIG KUBEBUILDER_ASSETS

cat >"$walk/walk.sh" <<EOF
set -eEuo pipefail
docwalk_step() { echo "docwalk: [\${SECONDS}s] --- \$1" >&2; }
# docwalk_file PATH: write (or append to) PATH, relative to the current
# directory; if PATH existed before the walk first reached it, compare.
declare -A docwalk_written=()
docwalk_file() {
	local path=\$PWD/\$1 text
	text=\$(cat)
	if [[ -n "\${docwalk_written[\$path]:-}" ]]; then
		printf '\n%s\n' "\$text" >>"\$path"
	elif [[ -e "\$path" ]]; then
		if ! diff -u "\$path" <(printf '%s\n' "\$text") >&2; then
			echo "docwalk: \$1 differs from the page's block (- the file, + the page)" >&2
			return 1
		fi
		echo "docwalk: \$1 is as the page shows it" >&2
	else
		mkdir -p "\$(dirname "\$path")"
		printf '%s\n' "\$text" >"\$path"
		docwalk_written[\$path]=1
		echo "docwalk: wrote \$1" >&2
	fi
}
docwalk_cleanup() {
	local rc=\$?
	local jobs
	jobs=\$(jobs -p)
	if [[ -n "\$jobs" ]]; then kill \$jobs 2>/dev/null || true; fi
	exit \$rc
}
trap docwalk_cleanup EXIT
$script
EOF

cleanup() {
	local rc=$?
	bash "$repo/hack/cluster.sh" down >/dev/null 2>&1 || true
	if ((rc == 0)); then
		chmod -R u+w "$walk" 2>/dev/null || true
		rm -rf "$walk"
		say "PASS: $page"
	else
		say "FAIL: $page (rc $rc); the walk is kept in $walk (the script is walk.sh, the reader's HOME is home/)"
	fi
}
trap cleanup EXIT

say "walking $page in $walk"
(cd "$home" && HOME=$home bash "$walk/walk.sh")
