#!/usr/bin/env bash
# Installs python3 (3.9 or later, standard library only) from Debian's packages for the
# controller tests (examples/controller-python, run by go tests in controller/ and
# cmd/wsmux). Idempotent: does nothing when a recent enough python3 is on PATH.
#
# Usage (as root): bash scripts/ci-python.sh
set -euo pipefail

if command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
	echo "ci-python: $(command -v python3) already installed ($(python3 --version 2>&1))"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "ci-python: python3 (3.9 or later) is not installed and installing it needs root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3 >/dev/null
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' || { echo "ci-python: $(python3 --version 2>&1) is older than 3.9 (socket.send_fds)" >&2; exit 1; }
echo "ci-python: $(command -v python3) installed ($(python3 --version 2>&1))"
