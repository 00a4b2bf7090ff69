#!/usr/bin/env bash
# Installs nginx from Debian's packages for the adapters' nginx e2e test
# (adapters/e2e/nginx_test.go), which starts its own nginx on loopback.
#
# Idempotent and non-interactive: does nothing when nginx is already on PATH
# (or in /usr/sbin); otherwise apt-get installs nginx-light where Debian
# still ships it (bookworm), else nginx. Services are kept from starting
# during the install (a deny-all policy-rc.d while apt runs, unless one is
# already there), and a system nginx that started anyway is stopped: the
# test needs the binary, not the service.
#
# Usage (as root): bash scripts/ci-nginx.sh
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

if command -v nginx >/dev/null 2>&1; then
	echo "ci-nginx: $(command -v nginx) already installed ($(nginx -v 2>&1))"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "ci-nginx: nginx is not installed and installing it needs root" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# Keep invoke-rc.d / deb-systemd-invoke from starting nginx's service during
# the install (exit 101: action forbidden). An existing policy is left as it is.
policy=/usr/sbin/policy-rc.d
added_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# ci-nginx.sh: no service starts while apt-get runs\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	added_policy=1
fi
cleanup() {
	if [ -n "$added_policy" ]; then
		rm -f "$policy"
	fi
}
trap cleanup EXIT

apt-get update -qq

pkg=nginx
cand=$(apt-cache policy nginx-light 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -n "$cand" ] && [ "$cand" != "(none)" ]; then
	pkg=nginx-light
fi
echo "ci-nginx: installing $pkg"
apt-get install -y -qq --no-install-recommends \
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
	"$pkg" >/dev/null

# If a service manager started the system nginx anyway, stop it (and keep it
# from starting at boot): the test runs its own instance.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl disable --now nginx.service >/dev/null 2>&1 || true
elif [ -s /run/nginx.pid ]; then
	nginx -s quit >/dev/null 2>&1 || true
fi

if ! command -v nginx >/dev/null 2>&1; then
	echo "ci-nginx: $pkg installed but no nginx binary on PATH" >&2
	exit 1
fi
echo "ci-nginx: $(command -v nginx) installed ($(nginx -v 2>&1))"
