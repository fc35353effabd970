#!/bin/bash
#
# test/demo.sh -- what "make demo" runs.
#
# The same set-up as "make test" (packages, build, install), then a
# throwaway server, run by the OS user postgres when we are root, with
# wal_level = logical, delta_join preloaded and, where the server has the
# parameter, allowed in output_plugin_libraries.  It lives in demo_data/
# (git-ignored) or, when postgres cannot enter this tree, in a folder under
# /tmp; it listens only on a private Unix socket.  psql runs test/demo.sql
# against it, echoing every statement; then the server is stopped and
# removed, whatever happened.
#
# Exit status: psql's (0 when the whole demo ran).

set -u

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$DJ_ROOT/test/common.sh"

if ! dj_ensure_packages || ! dj_build_install; then
	dj_warn "set-up failed"
	exit 1
fi
bindir=$("$PG_CONFIG" --bindir)

# ---- where the server lives ----

base=""
sock=""
started=""

cleanup() {
	if [ -n "$started" ]; then
		dj_server_stop "$base/data"
		started=""
	fi
	[ -n "$base" ] && rm -rf "$base"
	[ -n "$sock" ] && rm -rf "$sock"
	base=""
	sock=""
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

if dj_as_pg test -x "$DJ_ROOT" -a -r "$DJ_ROOT"; then
	base="$DJ_ROOT/demo_data"
	# a server an interrupted earlier demo left behind
	dj_stop_servers_below "$base"
	rm -rf "$base"
	mkdir -p "$base" || exit 1
else
	base=$(mktemp -d /tmp/delta_join_demo.XXXXXX) || exit 1
fi
sock=$(mktemp -d /tmp/delta_join_sock.XXXXXX) || exit 1
if dj_is_root; then
	chown postgres: "$base" "$sock" || exit 1
fi

port=$(dj_free_port) || exit 1

# ---- the server ----

dj_say "creating a throwaway server in $base/data (port $port)"
dj_server_init "$base/data" "$sock" "$port" "# delta_join demo
fsync = off" || exit 1

started=1
if ! dj_as_pg "$bindir/pg_ctl" -D "$base/data" -l "$base/server.log" -w start >/dev/null; then
	cat "$base/server.log"
	exit 1
fi

# ---- the demo ----

dj_say "running test/demo.sql"
echo
dj_as_pg "$bindir/psql" -X -q -a -v ON_ERROR_STOP=1 -h "$sock" -p "$port" \
	-d postgres -f - <"$DJ_ROOT/test/demo.sql"
rc=$?
echo
if [ "$rc" -ne 0 ]; then
	dj_warn "the demo failed; the end of the server log:"
	tail -n 30 "$base/server.log" >&2
else
	dj_say "demo complete; removing the server"
fi
exit "$rc"
