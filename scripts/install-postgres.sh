#!/usr/bin/env bash
# PostgreSQL's server binaries for the tests of the PostgreSQL stores (tests/postgres_cluster.py
# starts a throwaway cluster of its own with them, on a free loopback port). Already there: nothing
# to do. Else, as root with apt: Debian's postgresql package (which also creates the system's own
# cluster, as it always does; the tests do not use it). Else: say how, exit 1.
set -euo pipefail

have_server() {
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

if have_server; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "install-postgres: installing Debian's postgresql (server binaries for the tests)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends postgresql >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends postgresql >/dev/null; }
  have_server && exit 0
fi
echo "install-postgres: PostgreSQL's server binaries (initdb, pg_ctl) are missing — install them" \
  "(apt-get install postgresql, or your system's package); the PostgreSQL tests skip without them" >&2
exit 1
