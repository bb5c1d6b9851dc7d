#!/usr/bin/env bash
# Follows docs pages the way a reader does, and fails where a reader would:
# every ```sh block runs, in page order (pages in the order given), in one
# bash session; every ```go or
# ```yaml block that names a file (first line "// file: PATH" or
# "# file: PATH") is written to that file, blocks for the same file joined
# with a blank line. A file block for a file that already exists when the
# block is reached (a command generated it, like controller-gen's role.yaml)
# is not written: the file must equal the block, so the page shows what the
# reader really gets. Blocks without a file line are illustrations.
#
# Two HTML comments, invisible on the rendered page, steer the walk where a
# page edits files a tool generated (docs/adopting-kubebuilder.md edits a
# kubebuilder scaffold):
#   <!-- docwalk: replace -->   on the line before a file block: the file
#       must exist (a tool generated it, or an earlier page of the walk wrote
#       it: the guide replaces the quickstart's files), and the block replaces it (a Go file keeps its leading
#       /* ... */ license header, as the page tells the reader to); later
#       blocks for the same file are appended as usual.
#   <!-- docwalk: instead       up to a line "-->": the commands in between
#       run in place of the next sh block, which is not run. For a command
#       that cannot work here and has a local equivalent, such as
#       `go get github.com/reconcilekit/reconcilekit@latest` before the
#       module is published (a `go mod edit -replace` onto this checkout);
#       the page's source shows both.
#
# Usage:
#   hack/docwalk.sh PAGE.md...     walk the pages, in order, in one session: a
#                                  later page continues where the one before left
#                                  off (make test-docs walks docs/quickstart.md
#                                  then the chapters of docs/guide/, and
#                                  docs/adopting-kubebuilder.md)
#   hack/docwalk.sh -n PAGE.md...  print the script the walk would run
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
pages=()
for p in "$@"; do
	if [[ ! -f "$p" ]]; then
		pages=()
		break
	fi
	pages+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")")
done
[[ ${#pages[@]} -ge 1 ]] || {
	sed -n '/^# Usage:/,/^# The walk/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

say() { echo "docwalk: $*" >&2; }

# render turns a page ($page) into a bash script: sh blocks verbatim, file blocks
# as calls to docwalk_file with the block on stdin.
render() {
	awk -v page="$page" '
	function flush() {
		if (instead != "" && lang != "sh") { print page ":" start ": a docwalk instead comment must come right before an sh block" > "/dev/stderr"; exit 1 }
		if (lang == "sh" && instead != "") {
			printf "docwalk_step %s\n", quote(page ":" start " (instead, from the page'"'"'s docwalk comment at line " insteadAt ")")
			printf "%s", instead
			instead = ""
		} else if (lang == "sh") {
			printf "docwalk_step %s\n", quote(page ":" start)
			printf "%s", body
		} else if (file != "") {
			printf "docwalk_file %s %s <<'"'"'DOCWALK_EOF'"'"'\n%sDOCWALK_EOF\n", quote(file), mode, body
		}
		if (mode == "replace" && file == "") { print page ":" start ": a docwalk replace comment must come right before a file block" > "/dev/stderr"; exit 1 }
		mode = "write"
	}
	function quote(s) { gsub(/'"'"'/, "'"'"'\\'"'"''"'"'", s); return "'"'"'" s "'"'"'" }
	BEGIN { mode = "write" }
	!inblock && ininstead && /^-->$/ { ininstead = 0; next }
	!inblock && ininstead { instead = instead $0 "\n"; next }
	!inblock && /^<!-- docwalk: replace -->$/ { mode = "replace"; next }
	!inblock && /^<!-- docwalk: instead$/ { ininstead = 1; insteadAt = NR; instead = ""; next }
	!inblock && /^<!-- docwalk:/ { print page ":" NR ": unknown docwalk comment: " $0 > "/dev/stderr"; exit 1 }
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
	END {
		if (inblock) { print "page ends inside a code block" > "/dev/stderr"; exit 1 }
		if (ininstead || instead != "") { print "a docwalk instead comment is not followed by an sh block" > "/dev/stderr"; exit 1 }
	}
	' "$page"
}

script=
for page in "${pages[@]}"; do
	script+=$(render)$'\n'
done
if [[ -n "$dry_run" ]]; then
	printf '%s' "$script"
	exit 0
fi

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
# A reader's shell has none of these; make test-docs exports some of them.
unset KUBECONFIG KUBEBUILDER_ASSETS ENVTEST_USE_ENV TOOLS_BIN MAKEFLAGS MAKELEVEL MFLAGS

cat >"$walk/walk.sh" <<EOF
set -eEuo pipefail
docwalk_step() { echo "docwalk: [\${SECONDS}s] --- \$1" >&2; }
# docwalk_file PATH MODE: write (or append to) PATH, relative to the current
# directory; if PATH existed before the walk first reached it, compare, or
# with MODE replace, replace it (keeping a Go file's license header).
declare -A docwalk_written=()
docwalk_file() {
	local path=\$PWD/\$1 mode=\$2 text header
	text=\$(cat)
	if [[ "\$mode" == replace ]]; then
		if [[ ! -f "\$path" ]]; then
			echo "docwalk: \$1: the page replaces it, but it does not exist" >&2
			return 1
		fi
		header=
		if [[ "\$path" == *.go ]] && [[ "\$(head -c2 "\$path")" == "/*" ]]; then
			header=\$(awk '{ print } /^\*\/\$/ { exit }' "\$path")
			header+=\$'\n\n'
		fi
		printf '%s%s\n' "\$header" "\$text" >"\$path"
		docwalk_written[\$path]=1
		echo "docwalk: replaced \$1\${header:+ (below its license header)}" >&2
	elif [[ -n "\${docwalk_written[\$path]:-}" ]]; then
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
	# The walk ran in a session of its own: whatever the page started and
	# is still running (a background job's children too, which the walk's
	# own "kill the jobs" misses) goes with it.
	if [[ -s "$walk/session" ]]; then
		pkill -KILL -s "$(cat "$walk/session")" 2>/dev/null || true
	fi
	bash "$repo/hack/cluster.sh" down >/dev/null 2>&1 || true
	if ((rc == 0)); then
		chmod -R u+w "$walk" 2>/dev/null || true
		rm -rf "$walk"
		say "PASS: ${pages[*]}"
	else
		say "FAIL: ${pages[*]} (rc $rc); the walk is kept in $walk (the script is walk.sh, the reader's HOME is home/)"
	fi
}
trap cleanup EXIT

say "walking ${pages[*]} in $walk"
(cd "$home" && HOME=$home setsid -w bash -c 'echo $$ >"$1/session" && exec bash "$1/walk.sh"' docwalk "$walk")
