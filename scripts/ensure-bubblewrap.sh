#!/usr/bin/env bash
# Install Debian's bubblewrap (bwrap), the sandbox every notebook kernel runs in, when it is
# missing. Idempotent: does nothing when bwrap is already on the PATH.
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then exit 0; fi
echo "bubblewrap is not installed; installing Debian's bubblewrap package (the notebook sandbox)" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "bubblewrap is missing and this user cannot install packages: ask for 'apt install bubblewrap'" >&2
    exit 1
  fi
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
command -v bwrap >/dev/null 2>&1 || { echo "bubblewrap did not install (no bwrap on the PATH)" >&2; exit 1; }
