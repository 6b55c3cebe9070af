#!/usr/bin/env bash
# Runs a command beside a private PostgreSQL cluster: initdb into a new temporary folder, as an
# unprivileged user (root runs it as the system user evanesco-pg, made if missing), listening on
# 127.0.0.1 only, on a free port; stopped and removed when the command ends, whatever happens.
# The command sees:
#   EVANESCO_TEST_DATABASE_URL  postgres://evanesco@127.0.0.1:PORT/evanesco
#   EVANESCO_TEST_PG_RESTART    a script that restarts the server (fast shutdown), for the tests
#                               that check a worker survives the database restarting
#   EVANESCO_TEST_PG_OUTAGE     a script that stops the server and starts it again SECONDS later
#                               (its one argument), returning at once
#   EVANESCO_REQUIRE_POSTGRES=1 so the queue's tests fail, rather than skip, if it is unusable
# Usage: scripts/with-postgres.sh COMMAND [ARGS...]
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "with-postgres: PostgreSQL's server is not installed (apt-get install postgresql, or scripts/install-deps.sh)" >&2; exit 1; }
dir=$(mktemp -d /tmp/evanesco-pg.XXXXXX)
chmod 755 "$dir"
as=()
if [ "$(id -u)" = 0 ]; then
    id -u evanesco-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin evanesco-pg
    chown evanesco-pg "$dir"
    as=(runuser -u evanesco-pg --)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as[@]}" "$bin/initdb" -D "$dir/data" -U evanesco --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
ctl=("${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w)
stop() { "${ctl[@]}" stop -m immediate >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap stop EXIT
"${ctl[@]}" start >/dev/null
"$bin/createdb" -h 127.0.0.1 -p "$port" -U evanesco evanesco
# The restart closes every descriptor its caller left open first: a test process calls it, and
# the restarted server otherwise kept that process's pipes (232 of them once, among them the
# write end of swift test's output pipe, so swift test waited for the end of it forever).
cat >"$dir/restart" <<SCRIPT
#!/usr/bin/env bash
for fd in /proc/\$\$/fd/*; do n=\${fd##*/}; [ "\$n" -gt 2 ] && eval "exec \$n>&-" 2>/dev/null; done
exec ${ctl[*]} restart -m fast </dev/null >/dev/null 2>>"$dir/restart.log"
SCRIPT
chmod 755 "$dir/restart"
# An outage of SECONDS: the server stopped (fast shutdown), then started again, in the background
# (the caller goes on while the database is away; it is back after about SECONDS).
cat >"$dir/outage" <<SCRIPT
#!/usr/bin/env bash
for fd in /proc/\$\$/fd/*; do n=\${fd##*/}; [ "\$n" -gt 2 ] && eval "exec \$n>&-" 2>/dev/null; done
${ctl[*]} stop -m fast </dev/null >/dev/null 2>>"$dir/restart.log"
( sleep "\$1"; exec ${ctl[*]} start ) </dev/null >/dev/null 2>>"$dir/restart.log" &
SCRIPT
chmod 755 "$dir/outage"
export EVANESCO_TEST_DATABASE_URL="postgres://evanesco@127.0.0.1:$port/evanesco"
export EVANESCO_TEST_PG_RESTART="$dir/restart"
export EVANESCO_TEST_PG_OUTAGE="$dir/outage"
export EVANESCO_REQUIRE_POSTGRES=1
echo "with-postgres: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $dir)" >&2
"$@"
