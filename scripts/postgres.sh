#!/usr/bin/env bash
# Start Debian's PostgreSQL for the tests and print a URL to it on stdout.
#
# Installs the server first when it is missing and this runs as root with apt.
# Creates the login role and database `callrt` (password `callrt`) if needed.
# Exit status 1 (with the reason on stderr) when no server can be started.
set -euo pipefail

say() { echo "postgres.sh: $*" >&2; }

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing postgresql"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  else
    say "postgresql is not installed (apt-get install postgresql, as root)"
    exit 1
  fi
fi
if [ "$(id -u)" != 0 ]; then
  say "starting the server needs root (runuser postgres); set CALLRT_TEST_PG_URL instead"
  exit 1
fi

version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk '{print $1, $2}' | grep -qx "$version main"; then
  pg_createcluster "$version" main >&2
fi
status=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $4}')
if [ "$status" != "online" ]; then
  pg_ctlcluster "$version" main start >&2
fi
port=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p "$port" && break
  sleep 0.5
done

psql_admin() { runuser -u postgres -- psql -p "$port" -qAtX "$@"; }
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = 'callrt'")" != 1 ]; then
  psql_admin -c "CREATE ROLE callrt LOGIN SUPERUSER PASSWORD 'callrt'" >&2
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = 'callrt'")" != 1 ]; then
  runuser -u postgres -- createdb -p "$port" -O callrt callrt >&2
fi
echo "postgresql://callrt:callrt@127.0.0.1:${port}/callrt"
