#!/usr/bin/env bash
# Start a throw-away PostgreSQL server for the search tests and print its SQLAlchemy URL.
#
#   .ci/start-postgres.sh          # installs Debian's postgresql if needed, starts a cluster
#   source "$(.ci/start-postgres.sh --env-file)"   # or: eval "$(.ci/start-postgres.sh --exports)"
#   .ci/start-postgres.sh stop     # stops it and deletes the cluster
#
# The cluster lives in $KERNELEVOLVE_PG_ROOT (default: ${TMPDIR:-/tmp}/kernelevolve-pg), listens on
# 127.0.0.1 on a free port with trust authentication (test use only), and holds one database,
# kernelevolve_test. The URL goes to stdout and, as `export KERNELEVOLVE_TEST_PG_URL=...`, to
# $KERNELEVOLVE_PG_ROOT/env. PostgreSQL refuses to run as root, so under root the cluster is owned
# by the `postgres` user (created by the package; created here if missing).
set -euo pipefail

ROOT="${KERNELEVOLVE_PG_ROOT:-${TMPDIR:-/tmp}/kernelevolve-pg}"
DATA="$ROOT/data"
ENV_FILE="$ROOT/env"
DB=kernelevolve_test
DB_USER=kernelevolve

log() { echo "start-postgres: $*" >&2; }

find_bindir() {
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir; return
    fi
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$d/initdb" ] && { echo "$d"; return; }
    done
    command -v initdb >/dev/null 2>&1 && dirname "$(command -v initdb)"
}

as_owner() {  # run a command as the cluster's owner
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$OWNER" -- "$@"
    else
        "$@"
    fi
}

case "${1:-start}" in
    --env-file) echo "$ENV_FILE"; exit 0 ;;
    --exports) cat "$ENV_FILE"; exit 0 ;;
esac

BIN="$(find_bindir || true)"
if [ "${1:-start}" = stop ]; then
    if [ -n "$BIN" ] && [ -d "$DATA" ]; then
        OWNER="$(stat -c %U "$DATA")"
        as_owner "$BIN/pg_ctl" -D "$DATA" -m fast stop >&2 || true
    fi
    rm -rf "$ROOT"
    log "stopped and removed $ROOT"
    exit 0
fi

if [ -z "$BIN" ]; then
    log "initdb/pg_ctl not found: installing Debian's postgresql package"
    if [ "$(id -u)" != 0 ]; then
        log "not root: install postgresql yourself (apt-get install postgresql) and run this again"; exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    BIN="$(find_bindir)"
fi

OWNER="$(id -un)"
if [ "$(id -u)" = 0 ]; then
    OWNER=postgres
    id -u "$OWNER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$OWNER"
fi

# Already running from an earlier call: reuse it.
if [ -f "$ENV_FILE" ] && [ -d "$DATA" ] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    # shellcheck disable=SC1090
    . "$ENV_FILE"
    log "already running"
    echo "$KERNELEVOLVE_TEST_PG_URL"
    exit 0
fi

rm -rf "$ROOT"
mkdir -p "$ROOT"
chmod 755 "$ROOT"
[ "$(id -u)" = 0 ] && chown "$OWNER" "$ROOT"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

as_owner "$BIN/initdb" -D "$DATA" -U "$DB_USER" -A trust -E UTF8 --no-instructions >"$ROOT/initdb.log" 2>&1 \
    || { cat "$ROOT/initdb.log" >&2; exit 1; }
as_owner "$BIN/pg_ctl" -D "$DATA" -l "$ROOT/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $ROOT -c fsync=off" start >&2 \
    || { cat "$ROOT/server.log" >&2; exit 1; }
as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U "$DB_USER" "$DB"

URL="postgresql+psycopg://$DB_USER@127.0.0.1:$PORT/$DB"
echo "export KERNELEVOLVE_TEST_PG_URL=$URL" >"$ENV_FILE"
log "PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT (data in $DATA); stop with: $0 stop"
log "environment: source $ENV_FILE"
echo "$URL"
