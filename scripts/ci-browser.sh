#!/usr/bin/env bash
# Installs what the TypeScript client's and the web terminal's tests need
# (clients/ts, internal/tsinterop, gateway/webui) from
# Debian's packages: Node.js and npm when the machine has none, and the
# chromium browser that puppeteer-core drives headless. The npm packages
# themselves come from package-lock.json through `npm ci` (make ts-test).
#
# Idempotent and non-interactive; does nothing for what is already on PATH.
#
# Usage (as root): bash scripts/ci-browser.sh
set -euo pipefail

need=()
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-dejavu-core)

if [ ${#need[@]} -eq 0 ]; then
	echo "ci-browser: node $(node --version), npm $(npm --version), $(chromium --version 2>/dev/null) already installed"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "ci-browser: ${need[*]} missing and installing them needs root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
echo "ci-browser: installing ${need[*]}"
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "ci-browser: node $(node --version), npm $(npm --version), $(chromium --version 2>/dev/null)"
