#!/bin/bash
#
# test/bench/citus.sh -- distributed delta views on Citus (issue 11).
#
# Builds and installs delta_join (and Citus from ../shared/vendor/citus
# when it is missing), then runs throwaway servers on 127.0.0.1: a
# coordinator and two worker nodes.  On the same data, in one run, it
# measures and prints:
#
#   1. backfill: delta_join.create_view of the orders x items join over
#      plain tables on one server, against the same view distributed over
#      1 worker node (8 shard groups) -- and CREATE TABLE AS of the join on
#      the plain tables, for scale;
#   2. apply throughput of the distributed join view with its 8 shard
#      groups on 1 worker node, then with the second node added and the
#      shards rebalanced (4 groups each): ROUNDS rounds of an UPDATE of
#      BURST orders through the coordinator, the time from its commit until
#      wait() returns; changes/s and the ratio 2 nodes / 1 node.
#
# On a 2-core machine every server shares the same two cores: the ratio
# shows that the work spreads over the nodes, not a speed-up one would see
# on separate machines.
#
# Environment: SCALE=small (10x less data), ROUNDS=n (default 3).

set -u
set -o pipefail

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$DJ_ROOT/test/common.sh"

case "${SCALE:-full}" in
full) NORDERS=1000000 NMERCHANTS=10000 BURST=200000 ;;
small) NORDERS=100000 NMERCHANTS=1000 BURST=20000 ;;
*) dj_warn "SCALE must be full or small"; exit 1 ;;
esac
ROUNDS=${ROUNDS:-3}
IPM=10

if ! dj_ensure_packages || ! dj_build_install || ! dj_ensure_citus; then
	dj_warn "set-up failed"
	exit 1
fi
if [ ! -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ]; then
	dj_warn "Citus is not installed: nothing to measure"
	exit 1
fi
bindir=$("$PG_CONFIG" --bindir)

base=$(mktemp -d /tmp/delta_join_citus_bench.XXXXXX) || exit 1
sock=$(mktemp -d /tmp/delta_join_citus_sock.XXXXXX) || exit 1
dj_is_root && { chown -R postgres: "$base" "$sock" || exit 1; }
declare -A port
cleanup() {
	local n
	for n in coordinator worker1 worker2; do
		[ -f "$base/$n/postmaster.pid" ] && dj_server_stop "$base/$n"
	done
	rm -rf "$base" "$sock"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_node() {
	local n=$1 p
	p=$(dj_free_port) || exit 1
	port[$n]=$p
	mkdir -p "$base/$n" && dj_is_root && chown postgres: "$base/$n"
	dj_server_init "$base/$n" "$sock" "$p" "
listen_addresses = '127.0.0.1'
shared_preload_libraries = 'citus,delta_join'
citus.local_hostname = '127.0.0.1'
citus.shard_count = 8
max_connections = 100
max_worker_processes = 20
max_replication_slots = 20
max_wal_senders = 20
shared_buffers = 512MB
max_wal_size = 8GB
checkpoint_timeout = 30min" || exit 1
	dj_as_pg "$bindir/pg_ctl" -D "$base/$n" -l "$base/$n.log" -w start >/dev/null || {
		tail -20 "$base/$n.log"
		exit 1
	}
	q "$n" "CREATE EXTENSION citus" || exit 1
}

# q NODE SQL: run SQL on a node, print its result unaligned
q() {
	dj_as_pg "$bindir/psql" -h "$sock" -p "${port[$1]}" -U postgres -d postgres \
		-Atq -v ON_ERROR_STOP=1 -c "$2"
}
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }

dj_say "starting a coordinator and two worker nodes"
start_node coordinator
start_node worker1
start_node worker2
q coordinator "SELECT citus_set_coordinator_host('127.0.0.1', ${port[coordinator]})" >/dev/null || exit 1
q coordinator "SELECT citus_add_node('127.0.0.1', ${port[worker1]})" >/dev/null || exit 1
q coordinator "CREATE EXTENSION delta_join" || exit 1

dj_say "loading $NORDERS orders and $((NMERCHANTS * IPM)) items, distributed and as plain tables"
q coordinator "
CREATE TABLE items (merchant_id bigint, item_id bigint, item_name text, PRIMARY KEY (merchant_id, item_id));
CREATE TABLE orders (merchant_id bigint, order_id bigint, item_id bigint, amount numeric,
                     PRIMARY KEY (merchant_id, order_id));
SELECT create_distributed_table('orders', 'merchant_id');
SELECT create_distributed_table('items', 'merchant_id', colocate_with => 'orders');
INSERT INTO items SELECT m, i, 'item ' || m || '/' || i FROM generate_series(1, $NMERCHANTS) m, generate_series(1, $IPM) i;
INSERT INTO orders SELECT 1 + o % $NMERCHANTS, o, 1 + o % $IPM, o % 1000 FROM generate_series(1, $NORDERS) o;
CREATE TABLE items_plain (LIKE items INCLUDING ALL);
CREATE TABLE orders_plain (LIKE orders INCLUDING ALL);
INSERT INTO items_plain SELECT * FROM items;
INSERT INTO orders_plain SELECT * FROM orders;" >/dev/null || exit 1
q coordinator "VACUUM ANALYZE items_plain" && q coordinator "VACUUM ANALYZE orders_plain" || exit 1

JOIN='SELECT o.merchant_id, o.order_id, i.item_name, o.amount FROM %s o JOIN %s i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id'
# shellcheck disable=SC2059
plain_join=$(printf "$JOIN" orders_plain items_plain)
# shellcheck disable=SC2059
dist_join=$(printf "$JOIN" orders items)

dj_say "1. backfill"
t0=$(now)
q coordinator "CREATE TABLE ctas AS $plain_join; ALTER TABLE ctas ADD PRIMARY KEY (merchant_id, order_id)" || exit 1
t1=$(now)
q coordinator "SELECT delta_join.create_view('wide_plain', \$q\$ $plain_join \$q\$)" >/dev/null || exit 1
t2=$(now)
q coordinator "SELECT delta_join.create_view('wide', \$q\$ $dist_join \$q\$)" >/dev/null || exit 1
t3=$(now)
ctas=$(secs "$t0" "$t1")
single=$(secs "$t1" "$t2")
dist=$(secs "$t2" "$t3")
rows=$(q coordinator "SELECT count(*) FROM wide")
q coordinator "SELECT delta_join.drop_view('wide_plain')" >/dev/null

# apply ROUNDS bursts; prints the mean changes/s (BURST / seconds from the
# UPDATE's commit until wait() returns)
bursts() {
	local r t_commit t_fresh total=0
	for r in $(seq 1 "$ROUNDS"); do
		q coordinator "UPDATE orders SET amount = amount + 1 WHERE order_id % ($NORDERS / $BURST) = $r % ($NORDERS / $BURST)" >/dev/null || exit 1
		t_commit=$(now)
		[ "$(q coordinator "SELECT delta_join.wait('wide', '600s')")" = t ] || { dj_warn "wait() timed out"; exit 1; }
		t_fresh=$(now)
		total=$(echo "$total + $(secs "$t_commit" "$t_fresh")" | bc -l)
	done
	echo "$BURST * $ROUNDS / $total" | bc -l
}

dj_say "2. apply throughput, 8 shard groups on 1 node"
one=$(bursts)
dj_say "   adding the second node and rebalancing"
q coordinator "SELECT citus_add_node('127.0.0.1', ${port[worker2]})" >/dev/null || exit 1
q coordinator "SELECT citus_rebalance_start(shard_transfer_mode => 'force_logical')" >/dev/null || exit 1
q coordinator "SELECT citus_rebalance_wait()" >/dev/null || exit 1
q coordinator "CALL citus_cleanup_orphaned_resources()" >/dev/null
[ "$(q coordinator "SELECT delta_join.wait('wide', '600s')")" = t ] || { dj_warn "wait() timed out after the rebalance"; exit 1; }
placement=$(q coordinator "SELECT string_agg(n || ' groups on node ' || nodeport, ', ' ORDER BY nodeport) FROM (SELECT nodeport, count(*) n FROM citus_shards WHERE table_name = 'wide'::regclass GROUP BY nodeport) s")
dj_say "2. apply throughput, $placement"
two=$(bursts)
wrong=$(q coordinator "SELECT count(*) FROM (($dist_join) EXCEPT ALL TABLE wide) d")

printf '\n%s\n' "delta_join on Citus ($NORDERS orders, $BURST-row bursts, $ROUNDS rounds; all servers on this machine's $(nproc) cores)"
printf '%-62s %10s\n' "figure" "value"
printf '%-62s %10.2f\n' "CREATE TABLE AS + primary key, plain tables (s)" "$ctas"
printf '%-62s %10.2f\n' "create_view, plain tables on one server (s)" "$single"
printf '%-62s %10.2f\n' "create_view, distributed, 8 groups on 1 node (s)" "$dist"
printf '%-62s %10.2f\n' "  ratio distributed / one server" "$(echo "$dist / $single" | bc -l)"
printf '%-62s %10.0f\n' "apply, 1 worker node (changes/s)" "$one"
printf '%-62s %10.0f\n' "apply, 2 worker nodes (changes/s)" "$two"
printf '%-62s %10.2f\n' "  ratio 2 nodes / 1 node" "$(echo "$two / $one" | bc -l)"
printf '%-62s %10s\n' "rows of the target / rows of the query missing from it" "$rows / $wrong"
[ "$wrong" = 0 ] || { dj_warn "the distributed view lacks $wrong rows"; exit 1; }
