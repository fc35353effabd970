#!/bin/bash
#
# test/bench/outer_many.sh [L] [R] [KEYS] -- a many-to-many FULL JOIN kept
# by delta_join, against the INNER JOIN of the same tables.
#
# On a throwaway server (PostgreSQL of $PG_CONFIG, with delta_join installed
# there; port $PORT, default 5596; data under /tmp), loads l and r with L
# and R rows (defaults 600 and 3,000) spread over KEYS join values (default
# 6), so that each l row has R / KEYS partners and each r row L / KEYS:
# 300,000 rows in the view by default.  Then, for each view in turn
#
#   full     SELECT l.id, r.id, l.k, l.v, r.w FROM l FULL JOIN r ON l.k = r.k
#            in upsert mode (the default) and in retract mode
#   inner    the same with INNER JOIN (no row is ever null-extended): the
#            baseline, which writes the same rows without looking for any
#            row's null extensions
#
# it runs the same statements, each from the same data (the view is made
# again before each), and prints the time from each statement's commit
# until the view is fresh, and its ratio to the inner join's:
#
#   l v      the v of 2 % of l's rows (each writes its R / KEYS rows)
#   r w      the w of 2 % of r's rows
#   l k      1 % of l's rows moved to the next join value
#   r gone   every r row of one join value deleted (its l rows left alone:
#            null-extended)
#   r new    R / KEYS / 30 r rows inserted into that join value again
#
# then whether each target holds its query: retract mode exactly, upsert
# mode with every row of the query (rows that upsert leaves behind, of a
# moved l row's old partners, are allowed: DESIGN.md, "Upserts only").
#
# Run as root (the server runs as postgres), e.g.
#   test/bench/outer_many.sh 600 3000 6
#
set -euo pipefail

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$DJ_ROOT/test/common.sh"
. "$DJ_ROOT/test/bench/lib.sh"

L=${1:-600}
R=${2:-3000}
KEYS=${3:-6}
PORT=${PORT:-5596}
PG_CONFIG=${PG_CONFIG:-pg_config}
bench_server dj_outer_many "shared_buffers = '512MB'
max_wal_size = '4GB'"

sql <<SQL
CREATE EXTENSION delta_join;
CREATE TABLE l (id int PRIMARY KEY, k int, v int);
CREATE TABLE r (id int PRIMARY KEY, k int, w int);
CREATE INDEX ON l (k);
CREATE INDEX ON r (k);
ALTER TABLE l REPLICA IDENTITY FULL;
ALTER TABLE r REPLICA IDENTITY FULL;
SQL

declare -A QUERY
QUERY[full]='SELECT l.id AS lid, r.id AS rid, l.k, l.v, r.w FROM l FULL JOIN r ON l.k = r.k'
QUERY[inner]='SELECT l.id AS lid, r.id AS rid, l.k, l.v, r.w FROM l JOIN r ON l.k = r.k'
STEPS=("l v" "r w" "l k" "r gone" "r new")
declare -A STMT
STMT[l v]="UPDATE l SET v = v + 1 WHERE id % 50 = 0"
STMT[r w]="UPDATE r SET w = w + 1 WHERE id % 50 = 0"
STMT[l k]="UPDATE l SET k = (k + 1) % $KEYS WHERE id % 100 = 1"
STMT[r gone]="DELETE FROM r WHERE k = 2"
STMT[r new]="INSERT INTO r SELECT $R + g, 2, g FROM generate_series(1, GREATEST($R / $KEYS / 30, 1)) g"

# view $1 (full or inner) in mode $2 (upsert or retract), from fresh data:
# the times of the steps into T["$1 $2 step"], whether it holds its query
# into OK["$1 $2"]
declare -A T OK
run() {
	local view=$1 mode=$2 options='{}' missing extra step
	[ "$mode" = retract ] && options='{"retract": true}'
	sql <<SQL >/dev/null
TRUNCATE l, r;
INSERT INTO l SELECT g, g % $KEYS, g FROM generate_series(1, $L) g;
INSERT INTO r SELECT g, g % $KEYS, g FROM generate_series(1, $R) g;
VACUUM ANALYZE l, r;
SELECT delta_join.create_view('v', \$q\$ ${QUERY[$view]} \$q\$, options => '$options');
SQL
	for step in "${STEPS[@]}"; do
		T["$view $mode $step"]=$(until_fresh "${STMT[$step]}")
	done
	missing=$(sql -c "SELECT count(*) FROM (${QUERY[$view]} EXCEPT ALL TABLE v) m")
	extra=$(sql -c "SELECT count(*) FROM (TABLE v EXCEPT ALL ${QUERY[$view]}) x")
	if [ "$mode" = retract ]; then
		OK["$view $mode"]=$([ "$missing$extra" = 00 ] && echo exact || echo "WRONG: $missing missing, $extra extra")
	else
		OK["$view $mode"]=$([ "$missing" = 0 ] && echo "holds its query, $extra rows left behind" ||
			echo "WRONG: $missing missing")
	fi
	sql -c "SELECT delta_join.drop_view('v')" >/dev/null
}

echo "l $L rows, r $R rows, $KEYS join values: $((L * R / KEYS)) rows in each view"
for mode in upsert retract; do
	run inner "$mode"
	run full "$mode"
done

printf '\n%-8s %-8s %12s %12s %8s\n' mode step "FULL JOIN" "INNER JOIN" ratio
for mode in upsert retract; do
	for step in "${STEPS[@]}"; do
		f=${T["full $mode $step"]} i=${T["inner $mode $step"]}
		printf '%-8s %-8s %9s ms %9s ms %8s\n' "$mode" "$step" "$f" "$i" \
			"$(awk -v a="$f" -v b="$i" 'BEGIN {printf "%.2f", a / (b > 0 ? b : 1)}')"
	done
done
echo
for mode in upsert retract; do
	printf '%-8s FULL JOIN: %s; INNER JOIN: %s\n' "$mode" "${OK["full $mode"]}" "${OK["inner $mode"]}"
done
