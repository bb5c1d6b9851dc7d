#!/usr/bin/env bash
# Makes Prometheus available to the tests: Debian's `prometheus` package,
# which brings both the server (/usr/bin/prometheus, for the e2e alert
# assessment) and promtool (for `promtool test rules`). Installed once with
# apt-get; a second run only checks. Nothing is started here: the e2e suite
# runs its own server on 127.0.0.1 with its own config and data directory
# (dpkg's service start is left to policy-rc.d; the package's own service, if
# a host runs one, is never touched).
#
# Usage: hack/prometheus.sh    install if missing; print the bin dir (last line)
#
# Exit status: 0 when promtool and prometheus are installed; 3 when they are
# missing and apt cannot install them (no Debian mirror reachable, or not
# root and no password-less sudo): callers skip with that message.
set -euo pipefail

say() { echo "prometheus: $*" >&2; }

installed() { command -v promtool >/dev/null && command -v prometheus >/dev/null; }

if ! installed; then
	sudo=()
	if [[ $(id -u) != 0 ]]; then
		if ! sudo -n true 2>/dev/null; then
			say "promtool/prometheus are missing and installing them needs root (apt-get install -y prometheus)"
			exit 3
		fi
		sudo=(sudo -n)
	fi
	say "installing Debian's prometheus package (server and promtool)"
	log=$(mktemp)
	trap 'rm -f "$log"' EXIT
	if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends prometheus >"$log" 2>&1; then
		# The package index may be missing or stale on a fresh machine.
		if ! { "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
			apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends prometheus; } >"$log" 2>&1; then
			tail -n 5 "$log" >&2
			say "apt-get could not install prometheus (is a Debian mirror reachable?)"
			exit 3
		fi
	fi
	installed || { say "the prometheus package installed no promtool/prometheus on PATH"; exit 3; }
fi
dirname "$(command -v promtool)"
