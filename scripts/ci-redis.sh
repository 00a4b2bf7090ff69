#!/usr/bin/env bash
# Installs redis-server from Debian's packages for the gateway fleet's tests
# (gateway/sharedstate, cmd/wsmux's TestGatewayFleet), which start their own
# redis-server on loopback (internal/testnet/redis.go).
#
# Idempotent and non-interactive: does nothing when redis-server is already
# on PATH (or in /usr/bin); otherwise apt-get installs redis-server. Services
# are kept from starting during the install (a deny-all policy-rc.d while apt
# runs, unless one is already there), and a system Redis that started anyway
# is stopped: the tests need the binary, not the service.
#
# Usage (as root): bash scripts/ci-redis.sh
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

if command -v redis-server >/dev/null 2>&1; then
	echo "ci-redis: $(command -v redis-server) already installed ($(redis-server --version))"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "ci-redis: redis-server is not installed and installing it needs root" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# Keep invoke-rc.d / deb-systemd-invoke from starting Redis' service during
# the install (exit 101: action forbidden). An existing policy is left as it is.
policy=/usr/sbin/policy-rc.d
added_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# ci-redis.sh: no service starts while apt-get runs\nexit 101\n' >"$policy"
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
echo "ci-redis: installing redis-server"
apt-get install -y -qq --no-install-recommends \
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
	redis-server >/dev/null

# If a service manager started the system Redis anyway, stop it (and keep it
# from starting at boot): the tests run their own instances.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl disable --now redis-server.service >/dev/null 2>&1 || true
elif [ -s /run/redis/redis-server.pid ]; then
	kill "$(cat /run/redis/redis-server.pid)" >/dev/null 2>&1 || true
fi

if ! command -v redis-server >/dev/null 2>&1; then
	echo "ci-redis: redis-server installed but not on PATH" >&2
	exit 1
fi
echo "ci-redis: $(command -v redis-server) installed ($(redis-server --version))"
