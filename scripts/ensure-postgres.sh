#!/usr/bin/env bash
# Start the local PostgreSQL cluster when it is not answering (tests create their own databases).
set -euo pipefail
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then exit 0; fi
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "PostgreSQL is not installed; installing it" >&2
  apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
fi
ver=$(ls /etc/postgresql | sort -V | tail -1)
pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p 5432 && exit 0; sleep 0.2; done
echo "PostgreSQL did not start on 127.0.0.1:5432" >&2
exit 1
