#!/usr/bin/env bash
# Install Debian's HAProxy, the load balancer of `make cluster` and tests/cluster, when it is
# missing. Idempotent: does nothing when haproxy is already on the PATH.
set -euo pipefail
if command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ]; then exit 0; fi
echo "HAProxy is not installed; installing Debian's haproxy package (the cluster's load balancer)" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "haproxy is missing and this user cannot install packages: ask for 'apt install haproxy'" >&2
    exit 1
  fi
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends haproxy >/dev/null
[ -x /usr/sbin/haproxy ] || { echo "haproxy did not install (no /usr/sbin/haproxy)" >&2; exit 1; }
