#!/usr/bin/env bash
# Installs redis-server from Debian's packages for the gateway fleet's tests
# (gateway/sharedstate, cmd/wsmux's TestGatewayFleet), which start their own
# redis-server on loopback (internal/testnet/redis.go).
#
# Idempotent and non-interactive: does nothing when redis-server is already
# on PATH (or in /usr/bin); otherwise installs it without starting its
# service (scripts/ci-apt.sh), and stops a system Redis that started anyway:
# the tests need the binary, not the service.
#
# Usage (as root): bash scripts/ci-redis.sh
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
. "$(dirname "$0")/ci-apt.sh"

if command -v redis-server >/dev/null 2>&1; then
	echo "ci-redis: $(command -v redis-server) already installed ($(redis-server --version))"
	exit 0
fi
ci_apt_install ci-redis redis-server
if ! ci_stop_service redis-server.service && [ -s /run/redis/redis-server.pid ]; then
	kill "$(cat /run/redis/redis-server.pid)" >/dev/null 2>&1 || true
fi
if ! command -v redis-server >/dev/null 2>&1; then
	echo "ci-redis: redis-server installed but not on PATH" >&2
	exit 1
fi
echo "ci-redis: $(command -v redis-server) installed ($(redis-server --version))"
