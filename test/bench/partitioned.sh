#!/bin/bash
#
# test/bench/partitioned.sh [PARTS] [ORDERS] -- a join over a partitioned
# source costs what it costs over a plain one.
#
# On a throwaway server (PostgreSQL of $PG_CONFIG, with delta_join installed
# there; port $PORT, default 5597), loads the same ORDERS orders (default
# 200,000) twice: into a plain table and into one hashed by item into PARTS
# partitions (default 500), each joined to 1,000 items by a view (the
# lookups: an order's item by the item's key, an item's orders through the
# index on orders (item_id), routed to one partition by the hash).  Then, on
# each in turn, twice:
#
#   order    single-row UPDATEs of an order, each followed by wait(): the
#            ms from the statement until fresh, as pgbench's mean latency
#   item     the same for an item (its 200 orders rewritten)
#
# and prints the means and their ratios (partitioned / plain).  Before the
# lookups were routed, each key was looked up in every partition, and the
# views' checks read every partition's definition at each batch: 500
# partitions made a single-row change 4 to 5 times as slow.
#
# Run as root (the server runs as postgres), e.g.
#   test/bench/partitioned.sh 500 200000
#
set -euo pipefail

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$DJ_ROOT/test/common.sh"
. "$DJ_ROOT/test/bench/lib.sh"

PARTS=${1:-500}
ORDERS=${2:-200000}
SECONDS_EACH=${SECONDS_EACH:-8}
PORT=${PORT:-5597}
PG_CONFIG=${PG_CONFIG:-pg_config}
bench_server dj_partitioned "shared_buffers = '512MB'
max_wal_size = '4GB'"

sql >/dev/null <<SQL
CREATE EXTENSION delta_join;
CREATE SCHEMA plain;
CREATE SCHEMA parted;
CREATE TABLE plain.items (item_id int PRIMARY KEY, name text);
CREATE TABLE plain.orders (order_id int, item_id int, amount int,
  PRIMARY KEY (order_id, item_id));
CREATE TABLE parted.items (item_id int PRIMARY KEY, name text);
CREATE TABLE parted.orders (order_id int, item_id int, amount int,
  PRIMARY KEY (order_id, item_id)) PARTITION BY HASH (item_id);
SELECT format('CREATE TABLE parted.orders_%s PARTITION OF parted.orders
                 FOR VALUES WITH (MODULUS $PARTS, REMAINDER %s)', r, r)
FROM generate_series(0, $PARTS - 1) r \gexec
CREATE INDEX ON plain.orders (item_id);
CREATE INDEX ON parted.orders (item_id);
INSERT INTO plain.items SELECT g, 'item ' || g FROM generate_series(1, 1000) g;
INSERT INTO parted.items SELECT * FROM plain.items;
INSERT INTO plain.orders SELECT g, 1 + g % 1000, g FROM generate_series(1, $ORDERS) g;
INSERT INTO parted.orders SELECT * FROM plain.orders;
VACUUM ANALYZE;
SELECT delta_join.create_view(s || '.wide',
  'SELECT o.order_id, o.item_id, i.name, o.amount
   FROM ' || s || '.orders o JOIN ' || s || '.items i ON i.item_id = o.item_id')
FROM unnest(ARRAY['plain', 'parted']) s;
SELECT delta_join.wait();
SQL

cat >"$DIR/order.sql" <<SQL
\set id random(1, $ORDERS)
UPDATE :schema.orders SET amount = amount + 1 WHERE order_id = :id AND item_id = 1 + :id % 1000;
SELECT delta_join.wait();
SQL
cat >"$DIR/item.sql" <<'SQL'
\set id random(1, 1000)
UPDATE :schema.items SET name = name || '.' WHERE item_id = :id;
SELECT delta_join.wait();
SQL
chown postgres "$DIR"/*.sql

# mean latency (ms) of script $1 on schema $2
latency() {
	dj_as_pg "$BIN/pgbench" -h "$DIR" -p "$PORT" -n -T "$SECONDS_EACH" -D schema="$2" \
		-f "$DIR/$1.sql" postgres 2>&1 | awk '/latency average/ {print $4}'
}

declare -A MS
for round in 1 2; do
	for what in order item; do
		for schema in plain parted; do
			MS[$what.$schema]="${MS[$what.$schema]:-} $(latency "$what" "$schema")"
		done
	done
done

printf 'orders %s, partitions %s; a single-row UPDATE followed by wait(), mean ms of %s s, two rounds\n' \
	"$ORDERS" "$PARTS" "$SECONDS_EACH"
for what in order item; do
	printf '  %-6s plain %-16s partitioned %-16s ratio %s\n' "$what" "${MS[$what.plain]}" "${MS[$what.parted]}" \
		"$(awk -v a="${MS[$what.parted]}" -v b="${MS[$what.plain]}" \
			'BEGIN { split(a, x, " "); split(b, y, " "); printf "%.2f", (x[1] + x[2]) / (y[1] + y[2]) }')"
done
for schema in plain parted; do
	q="SELECT o.order_id, o.item_id, i.name, o.amount
	   FROM $schema.orders o JOIN $schema.items i ON i.item_id = o.item_id"
	printf '  %-6s view equals its query: %s\n' "$schema" "$(sql -c "
	  SELECT (SELECT count(*) FROM (TABLE $schema.wide EXCEPT ALL $q) a)
	       + (SELECT count(*) FROM ($q EXCEPT ALL TABLE $schema.wide) b) = 0")"
done
