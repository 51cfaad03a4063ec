#!/usr/bin/env bash
# Install a Debian package when the program it brings is missing: bubblewrap (bwrap, the sandbox
# every notebook kernel runs in) and haproxy (the load balancer of `make cluster` and tests/cluster).
# Idempotent: does nothing when the program is already there.
#   usage: scripts/ensure-package.sh PACKAGE PROGRAM "what it is for"
set -euo pipefail
package=$1 program=$2 purpose=$3
if command -v "$program" >/dev/null 2>&1 || [ -x "/usr/sbin/$program" ]; then exit 0; fi
echo "$package is not installed; installing Debian's $package package ($purpose)" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "$package is missing and this user cannot install packages: ask for 'apt install $package'" >&2
    exit 1
  fi
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$package" >/dev/null
command -v "$program" >/dev/null 2>&1 || [ -x "/usr/sbin/$program" ] || {
  echo "$package did not install (no $program)" >&2; exit 1; }
