# test/bench/lib.sh -- a throwaway server for a benchmark script.  Sourced,
# not run, after test/common.sh, with PORT and PG_CONFIG set.
#
# bench_server NAME EXTRA_CONF: a server of PG_CONFIG's bindir on PORT,
# its data and socket in a new folder /tmp/NAME.XXXXXX (DIR), stopped and
# removed when the script exits; EXTRA_CONF is added to its settings.
# sql ARGS: psql on it, unaligned, stopping at the first error.
# until_fresh STATEMENT: the ms from STATEMENT's commit until every view
# is fresh.

bench_server() {
	BIN=$("$PG_CONFIG" --bindir)
	DIR=$(mktemp -d "/tmp/$1.XXXXXX")
	chown postgres "$DIR"
	trap 'dj_server_stop "$DIR/data"; rm -rf "$DIR"' EXIT
	mkdir "$DIR/data" && chown postgres "$DIR/data"
	dj_server_init "$DIR/data" "$DIR" "$PORT" "$2"
	dj_as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w start >/dev/null
}

sql() { dj_as_pg "$BIN/psql" -h "$DIR" -p "$PORT" -d postgres -X -q -At -v ON_ERROR_STOP=1 "$@"; }

until_fresh() {
	sql <<SQL | tail -3 | paste -sd' ' | awk '{printf "%.0f", $3 - $1}'
SELECT delta_join.wait();
$1;
SELECT extract(epoch FROM clock_timestamp()) * 1000;
SELECT delta_join.wait(NULL, '900s');
SELECT extract(epoch FROM clock_timestamp()) * 1000;
SQL
}
