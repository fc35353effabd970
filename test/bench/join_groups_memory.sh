#!/bin/bash
#
# test/bench/join_groups_memory.sh [ORDERS] -- the memory the worker takes
# to apply one transaction that changes every order, for aggregates over
# joins (keyed recompute of groups through joins).
#
# On a throwaway server (PostgreSQL of $PG_CONFIG, with delta_join installed
# there; port $PORT, default 5597; data under /tmp), loads ORDERS orders
# (default 1,000,000) over ORDERS / 100 merchants, both with REPLICA
# IDENTITY FULL, and two views over orders JOIN merchants grouped by
# merchant:
#
#   sums    count(*) and sum(amount): additive (apply_additive.c); the
#           images of a changed order are its merchant and amount, one
#           per order here
#   ranges  min(amount) and max(amount): the groups recomputed; the images
#           are the merchant alone (what the join and the group key read),
#           ORDERS / 100 at most, which do not spill: it shows what the
#           path costs beside
#
# Then, twice for each view (alone), one transaction that updates every
# order's amount:
#
#   one source     the UPDATE alone: the capture spills its keys to disk,
#                  and the view reads them back a chunk at a time
#                  (apply_view.c, pieces_together);
#   then others    the same, and right after its commit 50,000 rows
#                  inserted into a table no view reads: the batch reads on
#                  through them (before 2026-12-04 it was cut at the
#                  UPDATE's end, and the view held every key in memory);
#   two sources    the same UPDATE and, in the same transaction, one
#                  merchant's row rewritten as it was: two sources changed,
#                  so the finder needs all their changed rows at once, and
#                  gathers every key in memory (the way a batch of one
#                  source was applied too before 2026-12-04)
#
# and prints, for each, the time from the commit until the view is fresh,
# the largest private memory (RssAnon, sampled every 20 ms) of the worker
# from the start of the statement until then (decoding the transaction
# takes about 100 MB of it: core's reorder buffer holds up to
# logical_decoding_work_mem, and the worker keeps up to 64 MB it freed),
# whether the view then equals its query, and what the worker's log says
# of the batch.  The amounts are spread, so that every changed row's
# images differ (identical images are kept once).
#
# Run as root (the server runs as postgres), e.g.
#   test/bench/join_groups_memory.sh 1000000
#
set -euo pipefail

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$DJ_ROOT/test/common.sh"
. "$DJ_ROOT/test/bench/lib.sh"

ORDERS=${1:-1000000}
MERCHANTS=$((ORDERS / 100))
PORT=${PORT:-5597}
PG_CONFIG=${PG_CONFIG:-pg_config}
bench_server dj_join_memory "shared_buffers = '1GB'
max_wal_size = '8GB'
log_min_messages = 'debug1'"

echo "loading $ORDERS orders, $MERCHANTS merchants"
sql -v orders="$ORDERS" -v merchants="$MERCHANTS" -v amount='abs(hashint4(g)) % 1000000 / 100.0' \
	< "$DJ_ROOT/test/bench/join_groups_schema.sql"
sql -c "CREATE TABLE elsewhere (x int)"

declare -A QUERY
QUERY[sums]="SELECT m.id AS merchant_id, count(*) AS n, sum(o.amount) AS total
FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.id"
QUERY[ranges]="SELECT m.id AS merchant_id, min(o.amount) AS lo, max(o.amount) AS hi
FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.id"

worker_pid() {
	sql -c "SELECT pid FROM pg_stat_activity WHERE backend_type LIKE 'delta_join worker%' AND datname = 'postgres'"
}

# the largest RssAnon of process $1, in MB, until file $2 exists
peak_rss() {
	local peak=0 kb
	while [ ! -e "$2" ]; do
		kb=$(awk '/^RssAnon:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0)
		[ "${kb:-0}" -gt "$peak" ] && peak=$kb
		sleep 0.02
	done
	echo $((peak / 1024))
}

round=0
logged=0
printf '\n%-8s %-12s %14s %16s %8s\n' view changed "until fresh" "worker peak" exact
for view in sums ranges; do
	sql -c "SELECT delta_join.create_view('$view', \$q\$ ${QUERY[$view]} \$q\$, strategy => 'auto')" >/dev/null
	mode=$(sql -c "SELECT mode FROM delta_join.views WHERE target = 'public.$view'")
	# (the first batch after a view is made is recomputed, not added)
	sql -c "UPDATE orders SET amount = amount WHERE id = 1" -c "SELECT delta_join.wait()" >/dev/null
	for changed in "one source" "then others" "two sources"; do
		round=$((round + 1))
		extra="" after=""
		[ "$changed" = "two sources" ] && extra="UPDATE merchants SET region = region WHERE id = 1;"
		[ "$changed" = "then others" ] && after="INSERT INTO elsewhere SELECT generate_series(1, 50000);"
		sql -c "SELECT delta_join.wait()" >/dev/null
		pid=$(worker_pid)
		rm -f "$DIR/done"
		peak_rss "$pid" "$DIR/done" > "$DIR/peak" &
		ms=$(sql <<SQL | tail -3 | paste -sd' ' | awk '{printf "%.0f", $3 - $1}'
BEGIN;
UPDATE orders SET amount = amount + 1;
$extra
COMMIT;
$after
SELECT extract(epoch FROM clock_timestamp()) * 1000;
SELECT delta_join.wait(NULL, '1800s');
SELECT extract(epoch FROM clock_timestamp()) * 1000;
SQL
)
		touch "$DIR/done"
		wait
		# how the worker applied it, from its log
		grep -Eo 'dirty keys: [0-9]+ were spilled to disk|additive apply: .*|groups through joins: .*|recomputing its whole result|whole recompute' \
			"$DIR/log" | tail -n +$((logged + 1)) | sed 's/^/    /' > "$DIR/how" || true
		logged=$((logged + $(wc -l < "$DIR/how")))
		exact=$(sql -c "SELECT (SELECT count(*) FROM (SELECT * FROM $view EXCEPT ALL (${QUERY[$view]})) a)
		              + (SELECT count(*) FROM ((${QUERY[$view]}) EXCEPT ALL SELECT * FROM $view) b) = 0")
		printf '%-8s %-12s %11s ms %13s MB %8s\n' "$view" "$changed" "$ms" "$(cat "$DIR/peak")" "$exact"
		sort -u "$DIR/how"
	done
	sql -c "SELECT delta_join.drop_view('$view')" >/dev/null
	echo "  ($view: $mode)"
done
