# Sourced by the installers of Debian packages that tests run as binaries
# (ci-nginx.sh, ci-redis.sh): they need the program, never its service.
#
# ci_apt_install TAG PKG...: as root, apt-get installs the packages with no
# service started while apt runs (a deny-all policy-rc.d, unless one is
# already there, removed afterwards), non-interactively, keeping any
# existing configuration files.
# ci_stop_service UNIT: stops and disables a service that started anyway
# under systemd (elsewhere the caller stops it its own way).

ci_apt_install() {
	local tag=$1
	shift
	if [ "$(id -u)" -ne 0 ]; then
		echo "$tag: $* not installed, and installing needs root" >&2
		return 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	# invoke-rc.d and deb-systemd-invoke honour policy-rc.d: exit 101 forbids the action.
	local policy=/usr/sbin/policy-rc.d added=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# %s: no service starts while apt-get runs\nexit 101\n' "$tag" >"$policy"
		chmod 0755 "$policy"
		added=1
	fi
	local rc=0
	apt-get update -qq || rc=$?
	if [ "$rc" -eq 0 ]; then
		echo "$tag: installing $*"
		apt-get install -y -qq --no-install-recommends \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
			"$@" >/dev/null || rc=$?
	fi
	if [ -n "$added" ]; then
		rm -f "$policy"
	fi
	return "$rc"
}

ci_stop_service() {
	if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
		systemctl disable --now "$1" >/dev/null 2>&1 || true
		return 0
	fi
	return 1
}
