#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests when /usr/bin/chromium is missing.
# Idempotent: does nothing when the binary is already there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
echo "Chromium is not installed; installing Debian's chromium package" >&2
SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
test -x /usr/bin/chromium || { echo "chromium did not install at /usr/bin/chromium" >&2; exit 1; }
