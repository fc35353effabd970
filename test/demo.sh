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
# against it, echoing every statement.  Then the backfill progress step
# (demo_backfill): a view of a larger table is created with concurrently =>
# true by a second psql in the background, while this script polls
# delta_join.progress and prints the rows it saw.  Then the server is
# stopped and removed, whatever happened.
#
# Exit status: 0 when the whole demo ran.

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

demo_psql() {
	dj_as_pg "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$port" \
		-d postgres "$@"
}

# The backfill progress step.  psql runs one statement at a time, so the
# concurrent create_view runs in a second psql in the background, and this
# shell polls delta_join.progress until it returns, printing each row it
# saw.  A backfill so quick that no poll caught it is said, not failed.
demo_backfill() {
	local create out pid create_rc row prev="" seen=""

	demo_psql -a <<'EOF' || return 1
-- Creating a view without stopping writers: 300,000 invoices of 1,000
-- customers, and a view of them created with concurrently => true.
CREATE TABLE customers (
	id			bigint PRIMARY KEY,
	name		text);

CREATE TABLE invoices (
	customer_id	bigint,
	invoice_id	bigint,
	total		numeric(18,2),
	PRIMARY KEY (customer_id, invoice_id));

INSERT INTO customers SELECT n, 'customer ' || n FROM generate_series(1, 1000) AS n;
INSERT INTO invoices SELECT n % 1000 + 1, n, n % 500 + 0.99 FROM generate_series(1, 300000) AS n;
-- rows_expected is the planner's estimate
ANALYZE customers, invoices;
EOF

	create="SELECT delta_join.create_view('invoice_wide', \$\$
	SELECT c.id AS customer_id, c.name, i.invoice_id, i.total
	FROM invoices AS i
	JOIN customers AS c ON c.id = i.customer_id \$\$, concurrently => true);"
	echo
	echo "-- In a second session (a psql in the background):"
	echo "$create"
	echo
	echo "-- Meanwhile, in this one, every 0.2 s until it returns (a row when it changed):"
	echo "SELECT phase, rows_done, rows_expected FROM delta_join.progress;"

	out=$(mktemp) || return 1
	demo_psql -c "$create" >"$out" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		row=$(demo_psql -A -t -F '|' -c \
			"SELECT phase, rows_done, rows_expected FROM delta_join.progress")
		if [ -n "$row" ] && [ "$row" != "$prev" ]; then
			seen="$seen$row"$'\n'
			prev=$row
		fi
		sleep 0.2
	done
	wait "$pid"
	create_rc=$?

	if [ -n "$seen" ]; then
		printf ' %-19s | %9s | %13s\n' phase rows_done rows_expected
		echo '---------------------+-----------+---------------'
		printf '%s' "$seen" | while IFS='|' read -r phase rows_done rows_expected; do
			printf ' %-19s | %9s | %13s\n' "$phase" "$rows_done" "$rows_expected"
		done
	else
		echo "(no progress row seen: the backfill ended between two polls)"
	fi
	echo
	echo "-- The second session's create_view returned:"
	cat "$out"
	rm -f "$out"
	[ "$create_rc" -eq 0 ] || return 1

	demo_psql -a <<'EOF'
-- The view equals its query: as many rows, none in one and not in the other.
WITH query AS (
	SELECT c.id AS customer_id, c.name, i.invoice_id, i.total
	FROM invoices AS i
	JOIN customers AS c ON c.id = i.customer_id),
view AS (
	SELECT customer_id, name, invoice_id, total FROM invoice_wide)
SELECT (SELECT count(*) FROM view) AS view_rows,
	   (SELECT count(*) FROM query) AS query_rows,
	   NOT EXISTS (TABLE view EXCEPT ALL TABLE query) AND
	   NOT EXISTS (TABLE query EXCEPT ALL TABLE view) AS equal;
EOF
}

dj_say "running test/demo.sql"
echo
demo_psql -a -f - <"$DJ_ROOT/test/demo.sql"
rc=$?
if [ "$rc" -eq 0 ]; then
	echo
	dj_say "backfill progress: a concurrent create_view, watched from a second session"
	echo
	demo_backfill
	rc=$?
fi
echo
if [ "$rc" -ne 0 ]; then
	dj_warn "the demo failed; the end of the server log:"
	tail -n 30 "$base/server.log" >&2
else
	dj_say "demo complete; removing the server"
fi
exit "$rc"
