#!/usr/bin/env bash
# Installs nginx from Debian's packages for the tests that start their own
# nginx on loopback (adapters/e2e/nginx_test.go, the gateway fleet's
# round-robin in cmd/wsmux).
#
# Idempotent and non-interactive: does nothing when nginx is already on PATH
# (or in /usr/sbin); otherwise installs nginx-light where Debian still ships
# it (bookworm), else nginx, without starting its service
# (scripts/ci-apt.sh), and stops a system nginx that started anyway: the
# tests need the binary, not the service.
#
# Usage (as root): bash scripts/ci-nginx.sh
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
. "$(dirname "$0")/ci-apt.sh"

if command -v nginx >/dev/null 2>&1; then
	echo "ci-nginx: $(command -v nginx) already installed ($(nginx -v 2>&1))"
	exit 0
fi
pkg=nginx
if [ "$(id -u)" -eq 0 ]; then
	apt-get update -qq
	cand=$(apt-cache policy nginx-light 2>/dev/null | awk '/Candidate:/ {print $2}')
	if [ -n "$cand" ] && [ "$cand" != "(none)" ]; then
		pkg=nginx-light
	fi
fi
ci_apt_install ci-nginx "$pkg"
if ! ci_stop_service nginx.service && [ -s /run/nginx.pid ]; then
	nginx -s quit >/dev/null 2>&1 || true
fi
if ! command -v nginx >/dev/null 2>&1; then
	echo "ci-nginx: $pkg installed but no nginx binary on PATH" >&2
	exit 1
fi
echo "ci-nginx: $(command -v nginx) installed ($(nginx -v 2>&1))"
