#!/usr/bin/env bash
# Run a command with a throw-away PostgreSQL and Redis, started from the server binaries for
# this run only and removed afterwards. DATABASE_URL / REDIS_URL, when already set, are used
# as they are instead. PostgreSQL refuses to run as root, so as root the server runs as the
# unprivileged 'postgres' user (or 'nobody').
set -euo pipefail

workdir=$(mktemp -d /tmp/cairn-test-services.XXXXXX)
chmod 755 "$workdir"
pids=()
cleanup() {
  status=$?
  for pid in "${pids[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  if [ -n "${PGDATA_DIR:-}" ] && [ -f "$PGDATA_DIR/postmaster.pid" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PGDATA_DIR" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$workdir"
  exit $status
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

as_pg() {
  if [ "$(id -u)" = 0 ]; then
    local user=postgres
    id -u postgres >/dev/null 2>&1 || user=nobody
    runuser -u "$user" -- "$@"
  else
    "$@"
  fi
}

if [ -z "${DATABASE_URL:-}" ]; then
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  [ -x "$PG_BIN/initdb" ] || PG_BIN=$(dirname "$(command -v initdb || echo /nonexistent/initdb)")
  [ -x "$PG_BIN/initdb" ] || { echo "PostgreSQL server binaries (initdb) not found: apt-get install postgresql" >&2; exit 1; }
  PGDATA_DIR="$workdir/pg"
  mkdir -p "$PGDATA_DIR"
  [ "$(id -u)" = 0 ] && chown "$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody)" "$PGDATA_DIR"
  pg_port=$(free_port)
  as_pg "$PG_BIN/initdb" -D "$PGDATA_DIR" -U cairn --auth=trust --no-sync -E UTF8 >"$workdir/initdb.log" 2>&1 \
    || { cat "$workdir/initdb.log" >&2; exit 1; }
  as_pg "$PG_BIN/pg_ctl" -D "$PGDATA_DIR" -w -l "$PGDATA_DIR/server.log" \
    -o "-p $pg_port -k $PGDATA_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null
  export DATABASE_URL="postgres://cairn@127.0.0.1:$pg_port/cairn"
  echo "test services: PostgreSQL on 127.0.0.1:$pg_port"
fi

if [ -z "${REDIS_URL:-}" ]; then
  command -v redis-server >/dev/null || { echo "redis-server not found: apt-get install redis-server" >&2; exit 1; }
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$workdir" \
    --logfile "$workdir/redis.log" &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  export REDIS_URL="redis://127.0.0.1:$redis_port/0"
  echo "test services: Redis on 127.0.0.1:$redis_port"
fi

export CAIRN_MODE=server
# Server mode refuses the public default key (system check cairn.E001): a random one per run.
export SECRET_KEY=${SECRET_KEY:-$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')}
# Threads started by tests (websocket consumers, races) must not keep connections open past a test.
export DB_CONN_MAX_AGE=${DB_CONN_MAX_AGE:-0}
"$@"
