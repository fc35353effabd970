#!/bin/bash
#
# test/bench/run.sh -- delta_join benchmarks (DESIGN.md §7, issues 3 and 4).
#
# The same set-up as "make demo" (packages, build, install), then one
# throwaway server tuned for a small machine (2 cores, 24 GB), run by the OS
# user postgres when we are root, on a private Unix socket.  In one run, on
# the same data, it measures and prints side by side:
#
#   1. load of orders / items (DESIGN.md §1 schema)
#   2. backfill: CREATE MATERIALIZED VIEW, REFRESH MATERIALIZED VIEW and
#      CREATE TABLE AS + primary key against delta_join.create_view
#   3. source write TPS (pgbench, 2 clients, single-row updates of orders):
#      (a) no view, (b) the delta join view, (c) a trigger-maintained copy
#   4. apply throughput of the join view after a burst of single-row updates
#   5. lag p50/p99 of the join view at a steady write rate
#   6. RSS of the apply worker before and after the burst
#   7. the aggregate view merchant_summary alone: apply throughput and lag
#      for uniform updates and for one hot merchant
#   8. the join view in each mode, alone (issue 8): apply throughput of a
#      backlog of orders updates for the inner join in upsert mode (the
#      baseline), the LEFT JOIN in upsert mode, the inner join and the LEFT
#      JOIN in retract mode, each as a ratio to the baseline
#  10. the lookup cache (issue 10): backlog apply of the join view with the
#      cache off and on, for updates of the hot merchant's orders (its ten
#      items looked up again and again), with the hit rate
#  11. big transactions (issue 10): a 100,000-row UPDATE, the time until
#      the join view is fresh against the bare statement's time (with no
#      view), beside the statement followed by the same UPDATE of a plain
#      copy of the target (the write the view cannot skip, done by SQL);
#      then one transaction that inserts NORDERS orders and updates
#      NORDERS others (2,000,000 rows at full scale): the worker's peak
#      private memory (RssAnon sampled every 0.1 s) and the time until fresh
#   9. the fallback paths (issue 9), against REFRESH MATERIALIZED VIEW of
#      the same query: one full recompute of the DISTINCT join when nothing changed
#      (and the rows it wrote), and keyed recompute of the join (strategy
#      none) until fresh after 0.1 %, 1 % and 10 % of the orders changed
#
# Environment:
#   SCALE=small    everything 10x smaller, 5 s runs: a quick smoke run
#   STEPS=modes    load, then step 8 only
#   STEPS=fallback load, then step 9 only
#   STEPS=cache    load, the hot merchant, then step 10 only
#   STEPS=bulk     load, then step 11 only: ROUNDS (default 3) rounds of
#                  the 100,000-row UPDATE, the verdict on their median
#   STEPS=commits  load, then step 12 only: for synchronous_commit on and
#                  off in the writers' sessions, ROUNDS rounds of write TPS
#                  without and with the join view (2 clients), and the
#                  view's lag at RATE writes/s
#   STEPS=parallel load, then step 13 only: parallel apply, apply_workers 1
#                  (the default) against PAR_WORKERS (default: the CPUs):
#                  a 100,000-row UPDATE until fresh, the join's and the
#                  aggregate's backlog apply
#   STEPS=writes   load, then step 3 only, as ROUNDS (default 3) rounds of
#                  no view / delta view / trigger copy, each ratio taken
#                  against the no-view run of its own round
#   STEPS=trees    load, then step 4's backlog (the join view, the worker
#                  held) with each checkout of TREES (space-separated
#                  folders, each built here) installed in turn, ROUNDS
#                  (default 2) rounds of them, even rounds in reverse order;
#                  the server restarted and the extension made again at
#                  each switch.  Each tree's rates and the worker's CPU
#                  time per change, and their means against the first
#                  tree's.  test/bench/compare_trees.sh runs it for two
#                  commits.
#   DURATION=s     length of each fixed-time pgbench run (default 20, small 5)
#   RATE=n         writes/s of the lag runs (default 2000)
#   SEED=n         pgbench --random-seed (default 42)
#   KEEP_LOG=path  copy the server log there at the end
#   PG=17, PG=18   against that major (in a chroot made by test/chroot.sh
#                  when this machine lacks it; KEEP_LOG is then inside it)
#
# Exit status: 0 when every step ran (targets missed are reported, not
# failures), 1 when a step failed.

set -u
set -o pipefail

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$DJ_ROOT/test/common.sh"
BENCH=$DJ_ROOT/test/bench

# PG=17 or PG=18 on a machine without it: the same run in a chroot that has
# it (test/chroot.sh), with the settings above passed on
if dj_major_elsewhere; then
	settings=("PG=$DJ_PG_MAJOR")
	for v in SCALE STEPS DURATION RATE SEED ROUNDS PAR_WORKERS; do
		[ -n "${!v:-}" ] && settings+=("$v=${!v}")
	done
	exec bash "$DJ_ROOT/test/chroot.sh" "$DJ_PG_MAJOR" run env "${settings[@]}" test/bench/run.sh
fi

# ---- sizes ----

SCALE=${SCALE:-full}
case "$SCALE" in
full)
	NORDERS=1000000 NMERCHANTS=10000 NHOT=100000 BURST=200000 BULK=100000
	DURATION=${DURATION:-20} ;;
small)
	NORDERS=100000 NMERCHANTS=1000 NHOT=10000 BURST=20000 BULK=10000
	DURATION=${DURATION:-5} ;;
*)
	dj_warn "SCALE must be full or small, not '$SCALE'"
	exit 1 ;;
esac
IPM=10							# items per merchant: items = NMERCHANTS * IPM
NITEMS=$((NMERCHANTS * IPM))
RATE=${RATE:-2000}
PAR_WORKERS=${PAR_WORKERS:-$(nproc)}	# apply_workers of step 13
SEED=${SEED:-42}
CLIENTS=2						# clients of the fixed-time TPS runs
BURST_CLIENTS=4					# clients of the bursts
RATE_CLIENTS=8					# clients of the rate runs (enough to reach RATE with fsync)
SAMPLE_EVERY=0.05				# seconds between two samples of delta_join.status

JOIN_QUERY='SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
  FROM orders AS o
  JOIN items  AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id'
# step 8: the same select list in every mode (retract needs both keys)
MODES_COLS='o.merchant_id, o.order_id, o.item_id, i.merchant_id AS i_merchant_id, i.item_id AS i_item_id, i.item_name, o.amount'
MODES_ON='ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id'
STEPS=${STEPS:-all}
AGG_QUERY='SELECT merchant_id, count(*) AS order_count, sum(amount) AS total_amount
  FROM orders GROUP BY merchant_id'

if [ "$STEPS" = trees ]; then
	# the trees compared, not this one: each built before anything is
	# measured, the first installed
	[ -n "${TREES:-}" ] || { dj_warn "STEPS=trees needs TREES, the checkouts to compare"; exit 1; }
	dj_ensure_packages || { dj_warn "set-up failed"; exit 1; }
	for t in $TREES; do
		dj_say "building $t"
		"$MAKE" --no-print-directory -C "$t" "PG_CONFIG=$PG_CONFIG" all >/dev/null ||
			{ dj_warn "building $t failed"; exit 1; }
	done
	"$MAKE" --no-print-directory -C "${TREES%% *}" "PG_CONFIG=$PG_CONFIG" install >/dev/null ||
		{ dj_warn "installing ${TREES%% *} failed"; exit 1; }
elif ! dj_ensure_packages || ! dj_build_install; then
	dj_warn "set-up failed"
	exit 1
fi
bindir=$("$PG_CONFIG" --bindir)

# ---- the server ----

base=""
sock=""
started=""
held_pid=""

cleanup() {
	[ -n "$held_pid" ] && kill -CONT "$held_pid" 2>/dev/null
	if [ -n "$started" ]; then
		dj_server_stop "$base/data"
		started=""
	fi
	if [ -n "${KEEP_LOG:-}" ] && [ -n "$base" ] && [ -f "$base/server.log" ]; then
		cp "$base/server.log" "$KEEP_LOG" && dj_say "server log copied to $KEEP_LOG"
	fi
	[ -n "$base" ] && rm -rf "$base"
	[ -n "$sock" ] && rm -rf "$sock"
	base=""
	sock=""
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

die() {
	dj_warn "$*"
	if [ -n "$base" ] && [ -f "$base/server.log" ]; then
		dj_warn "the end of the server log:"
		tail -n 30 "$base/server.log" >&2
	fi
	exit 1
}

base=$(mktemp -d /tmp/delta_join_bench.XXXXXX) || exit 1
sock=$(mktemp -d /tmp/delta_join_sock.XXXXXX) || exit 1
# the scripts, where postgres can read them
cp "$BENCH"/*.sql "$BENCH"/*.pgbench "$base/" || exit 1
if dj_is_root; then
	chown -R postgres: "$base" "$sock" || exit 1
fi

port=$(dj_free_port) || die "no free port"

dj_say "creating a throwaway server in $base/data (port $port, SCALE=$SCALE)"
dj_server_init "$base/data" "$sock" "$port" "# delta_join benchmark: 2 cores, 24 GB
max_connections = 50
shared_buffers = 2GB
effective_cache_size = 16GB
work_mem = 64MB
maintenance_work_mem = 1GB
wal_buffers = 64MB
max_wal_size = 32GB
min_wal_size = 2GB
checkpoint_timeout = 30min
checkpoint_completion_target = 0.9
synchronous_commit = on
log_line_prefix = '%m [%p] %b '
log_checkpoints = on" || exit 1

started=1
dj_as_pg "$bindir/pg_ctl" -D "$base/data" -l "$base/server.log" -w start >/dev/null ||
	die "the server did not start"
dj_as_pg "$bindir/createdb" -h "$sock" -p "$port" -U postgres bench ||
	die "createdb failed"

# ---- helpers ----

# psql on the bench database, unaligned, tuples only; stops at the first error
q() {
	dj_as_pg "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$sock" -p "$port" \
		-U postgres -d bench "$@"
}
sizes=(-v norders="$NORDERS" -v nmerchants="$NMERCHANTS" -v ipm="$IPM" -v nhot="$NHOT")

now() { date +%s.%N; }
# awk arithmetic: calc 'expression'
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
fmt() { awk -v x="$1" -v d="${2:-0}" 'BEGIN { if (x == "") print "n/a"; else printf "%.*f", d, x }'; }

# pgbench with the sizes and the fixed seed; extra arguments follow
bench() {
	dj_as_pg env PGOPTIONS="${PGOPTS:-}" "$bindir/pgbench" -n -M prepared \
		-h "$sock" -p "$port" -U postgres --random-seed="$SEED" \
		-D norders="$NORDERS" -D nmerchants="$NMERCHANTS" -D ipm="$IPM" \
		-D nhot="$NHOT" "$@" bench
}
tps_of() { sed -n 's/^tps = \([0-9.]*\) (without initial connection time).*/\1/p' "$1"; }

# A clean start for each measured write run: dead rows vacuumed, dirty
# buffers written.
settle() {
	q -c "VACUUM orders" -c "VACUUM items" -c "CHECKPOINT" >/dev/null || die "VACUUM/CHECKPOINT failed"
}

# Fixed-time write run of single-row updates: prints the TPS
write_run() {
	local name=$1 log="$base/pgbench_$1.log"
	settle
	bench -f "$base/update_uniform.pgbench" -c "$CLIENTS" -j "$CLIENTS" \
		-T "$DURATION" >"$log" 2>&1 || { cat "$log" >&2; die "pgbench ($name) failed"; }
	tps_of "$log"
}

wait_view() {
	local ok
	ok=$(q -c "SELECT delta_join.wait('$1', '900s')") || die "delta_join.wait('$1') failed"
	[ "$ok" = t ] || die "delta_join.wait('$1') timed out; status: $(q -c "SELECT * FROM delta_join.status")"
}

worker_pid() {
	q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker' LIMIT 1"
}
# Resident memory of the worker in kB: "VmRSS RssAnon VmHWM" (RssAnon is its
# private memory; VmRSS also counts the shared buffers it has touched)
worker_mem() {
	local pid
	pid=$(worker_pid)
	if [ -z "$pid" ] || [ ! -r "/proc/$pid/status" ]; then
		echo "  "
		return
	fi
	awk '/^VmRSS:/ {r=$2} /^RssAnon:/ {a=$2} /^VmHWM:/ {h=$2} END {print r, a, h}' "/proc/$pid/status"
}

# Start sampling delta_join.status of view $2 under tag $1 in the background
sampler_pid=""
start_sampler() {
	q -c "DELETE FROM bench_stop WHERE tag = '$1'" >/dev/null
	q -c "CALL bench_sample('$1', '$2', 1800, $SAMPLE_EVERY)" >/dev/null 2>"$base/sampler_$1.err" &
	sampler_pid=$!
	sleep 0.3
}
stop_sampler() {
	q -c "INSERT INTO bench_stop VALUES ('$1')" >/dev/null
	wait "$sampler_pid" || die "sampler $1 failed: $(cat "$base/sampler_$1.err")"
	sampler_pid=""
}

# Holding the worker: it is stopped (SIGSTOP) while it waits for work, so
# that the WAL of the writers piles up, and continued (SIGCONT) to decode
# and apply all of it.  (Holding a lock on the target instead made the view
# wait for its retry backoff, up to 5 s, after the release, and that wait
# counted as apply time.)
hold_target() {	# tag view
	wait_view "$2"
	held_pid=$(worker_pid)
	[ -n "$held_pid" ] || die "no delta_join worker to hold"
	kill -STOP "$held_pid" || die "could not stop the worker"
}
release_target() {	# tag
	kill -CONT "$held_pid" || die "could not continue the worker"
	held_pid=""
}

# CPU seconds (user + system) a process has used, from /proc; empty if gone
worker_cpu() {
	[ -r "/proc/$1/stat" ] || return 0
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"
}

# Burst of BURST single-row updates: many small transactions, as fast as
# BURST_CLIENTS clients go, synchronous_commit off in those sessions so that
# the writers outrun the worker.
#
# burst_backlog: the worker is held (hold_target) during the burst, then
# released; sets B_RATE = changes applied / (time from release until
# delta_join.wait() returns): the apply throughput of a backlog, what the
# worker can do alone; and B_CPU, the worker's CPU time per change (µs)
# meanwhile, which other work on the machine moves less than B_RATE.
# burst_concurrent: the worker runs during the burst; sets B_RATE = BURST /
# (time from burst start until wait() returns), which cannot exceed the
# writers' own rate B_WRITE.
# Both set B_WRITE (writes/s of the burst), B_PEAK (highest
# Δchanges_seen/Δt over 1 s windows) and B_SEEN (changes seen by the view).
burst() {
	local mode=$1 tag=$2 view=$3 script=$4 log="$base/pgbench_$2.log"
	local t0 t1 t2 c0 per cpu_pid cpu0="" cpu1=""
	settle
	wait_view "$view"
	per=$((BURST / BURST_CLIENTS))
	[ "$mode" = backlog ] && hold_target "$tag" "$view"
	start_sampler "$tag" "$view"
	c0=$(q -c "SELECT changes_seen FROM delta_join.status WHERE target::regclass = '$view'::regclass")
	t0=$(now)
	PGOPTS="-c synchronous_commit=off" bench -f "$base/$script" -c "$BURST_CLIENTS" \
		-j 2 -t "$per" >"$log" 2>&1 || { cat "$log" >&2; die "pgbench ($tag) failed"; }
	t1=$(now)
	B_WRITE=$(calc "$per * $BURST_CLIENTS / ($t1 - $t0)")
	if [ "$mode" = backlog ]; then
		sleep 1		# async commits flushed: the whole burst is in the WAL
		cpu_pid=$held_pid
		cpu0=$(worker_cpu "$cpu_pid")
		t1=$(now)
		release_target "$tag"
	fi
	wait_view "$view"
	t2=$(now)
	[ "$mode" = backlog ] && cpu1=$(worker_cpu "$cpu_pid")
	stop_sampler "$tag"
	B_SEEN=$(q -c "SELECT changes_seen - $c0 FROM delta_join.status WHERE target::regclass = '$view'::regclass")
	if [ "$mode" = backlog ]; then
		B_RATE=$(calc "$B_SEEN / ($t2 - $t1)")
		B_CPU=""
		[ -n "$cpu0" ] && [ -n "$cpu1" ] && [ "$B_SEEN" -gt 0 ] 2>/dev/null &&
			B_CPU=$(calc "($cpu1 - $cpu0) * 1000000 / $B_SEEN")
	else
		B_RATE=$(calc "$per * $BURST_CLIENTS / ($t2 - $t0)")
	fi
	B_PEAK=$(q -c "
		WITH s AS (SELECT extract(epoch FROM t) AS e, changes FROM bench_samples WHERE tag = '$tag'),
		     w AS (SELECT s1.e, (SELECT s2.changes - s1.changes FROM s s2
		                         WHERE s2.e >= s1.e + 1 ORDER BY s2.e LIMIT 1) AS d,
		                        (SELECT s2.e - s1.e FROM s s2
		                         WHERE s2.e >= s1.e + 1 ORDER BY s2.e LIMIT 1) AS dt
		           FROM s s1)
		SELECT max(d / dt) FROM w WHERE dt IS NOT NULL")
	[ "$B_SEEN" -ge "$BURST" ] 2>/dev/null ||
		dj_warn "$tag: the view saw $B_SEEN changes for a burst of $BURST updates"
}

# Steady write rate RATE for DURATION s (synchronous_commit on), sampling the
# view's lag every SAMPLE_EVERY s.  Sets L_P50, L_P99, L_MAX (ms), L_RATE
# (writes/s achieved), L_N (samples).
lag_run() {
	local tag=$1 view=$2 script=$3 log="$base/pgbench_$1.log"
	settle
	wait_view "$view"
	start_sampler "$tag" "$view"
	local t0 t1
	t0=$(now)
	bench -f "$base/$script" -c "$RATE_CLIENTS" -j 2 --rate="$RATE" \
		-T "$DURATION" >"$log" 2>&1 || { cat "$log" >&2; die "pgbench ($tag) failed"; }
	t1=$(now)
	stop_sampler "$tag"
	wait_view "$view"
	L_RATE=$(tps_of "$log")
	read -r L_P50 L_P99 L_MAX L_N < <(q -F ' ' -c "
		SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lag_ms),
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag_ms),
		       max(lag_ms), count(*)
		FROM bench_samples
		WHERE tag = '$tag' AND extract(epoch FROM t) BETWEEN $t0 + 1 AND $t1")
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }
# verdict VALUE OP LIMIT
verdict() { awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
	if (v == "" || v == "n/a") { print "n/a"; exit }
	ok = (op == ">=") ? (v + 0 >= l + 0) : (v + 0 < l + 0)
	print ok ? "ok" : "MISSED" }'; }
mb() { awk -v k="$1" 'BEGIN { if (k == "") print "n/a"; else printf "%.0f MB", k / 1024 }'; }

row() { printf '%-44s %16s  %-26s %7s  %-10s %s\n' "$@"; }
line() { printf '%.0s-' $(seq 1 118); echo; }

# Step 8: one mode of the join view, alone: its backlog apply throughput
# (burst backlog), then a check that the target holds the query's rows
# (equal in retract mode; a superset in upsert mode, residual rows allowed).
# Sets M_RATE and M_CHECK.
mode_run() {	# tag join options
	local tag=$1 join=$2 options=$3
	local query="SELECT $MODES_COLS FROM orders o $join items i $MODES_ON"
	q -c "SELECT delta_join.create_view('modes_view', \$q\$ $query \$q\$, options => '$options')" >/dev/null ||
		die "create_view(modes_view, $tag) failed"
	burst backlog "mode_$tag" modes_view update_uniform.pgbench
	M_RATE=$B_RATE
	M_CHECK=$(q -c "SELECT (SELECT count(*) FROM (($query) EXCEPT ALL TABLE modes_view) m)
	                || ' missing, ' ||
	                (SELECT count(*) FROM (TABLE modes_view EXCEPT ALL ($query)) e) || ' extra'") ||
		die "comparing modes_view ($tag) failed"
	q -c "SELECT delta_join.drop_view('modes_view')" >/dev/null || die "drop_view(modes_view) failed"
}

modes_step() {
	dj_say "8. the join view alone, in each mode: backlog of $BURST orders updates"
	mode_run inner_upsert JOIN '{}'
	MI_RATE=$M_RATE MI_CHECK=$M_CHECK
	mode_run left_upsert "LEFT JOIN" '{}'
	ML_RATE=$M_RATE ML_CHECK=$M_CHECK
	mode_run inner_retract JOIN '{"retract": true}'
	MR_RATE=$M_RATE MR_CHECK=$M_CHECK
	mode_run left_retract "LEFT JOIN" '{"retract": true}'
	MLR_RATE=$M_RATE MLR_CHECK=$M_CHECK
}

# Step 9.  The join as DISTINCT has the same rows, and takes the
# full-recompute path (a result keyed by all its columns).
fallback_step() {
	local t0 w0 n pct
	dj_say "9. fallback paths: REFRESH MATERIALIZED VIEW of each query, then the same by delta_join"
	F_REFRESH_S=$(refresh_time "SELECT DISTINCT $MODES_COLS FROM orders o JOIN items i $MODES_ON")
	K_REFRESH_S=$(refresh_time "SELECT $MODES_COLS FROM orders o JOIN items i $MODES_ON")

	# full recompute, nothing changed: a no-op update makes the view dirty
	q -c "SELECT delta_join.create_view('full_view', \$q\$ SELECT DISTINCT $MODES_COLS FROM orders o JOIN items i $MODES_ON \$q\$,
	        strategy => 'none', options => '{\"refresh_interval\": 0, \"batch_timeout\": 0}')" >/dev/null ||
		die "create_view(full_view) failed"
	F_MODE=$(q -c "SELECT mode FROM delta_join.views WHERE target = 'public.full_view'")
	wait_view full_view
	settle
	w0=$(q -c "SELECT rows_upserted FROM delta_join.status WHERE target = 'public.full_view'")
	t0=$(now)
	q -c "UPDATE items SET item_name = item_name WHERE merchant_id = 1 AND item_id = 1" >/dev/null
	wait_view full_view
	F_FULL_S=$(calc "$(now) - $t0")
	F_WRITTEN=$(q -c "SELECT rows_upserted - $w0 FROM delta_join.status WHERE target = 'public.full_view'")
	F_CHECK=$(q -c "SELECT (SELECT count(*) FROM ((SELECT DISTINCT $MODES_COLS FROM orders o JOIN items i $MODES_ON)
	                        EXCEPT ALL TABLE full_view) m) + (SELECT count(*) FROM (TABLE full_view
	                        EXCEPT ALL (SELECT DISTINCT $MODES_COLS FROM orders o JOIN items i $MODES_ON)) e)")
	q -c "SELECT delta_join.drop_view('full_view')" >/dev/null || die "drop_view(full_view) failed"

	# keyed recompute: the join with strategy none
	q -c "SELECT delta_join.create_view('keyed_view', \$q\$ SELECT $MODES_COLS FROM orders o JOIN items i $MODES_ON \$q\$,
	        strategy => 'none', options => '{\"batch_timeout\": 0}')" >/dev/null ||
		die "create_view(keyed_view) failed"
	K_MODE=$(q -c "SELECT mode FROM delta_join.views WHERE target = 'public.keyed_view'")
	for pct in 0.1 1 10; do
		n=$(awk -v p="$pct" 'BEGIN { printf "%d", 100 / p }')
		wait_view keyed_view
		settle
		t0=$(now)
		q -c "UPDATE orders SET amount = amount + 1 WHERE order_id % $n = 0" >/dev/null || die "update ($pct %) failed"
		wait_view keyed_view
		eval "K_S_${pct/./_}=$(calc "$(now) - $t0")"
	done
	K_CHECK=$(q -c "SELECT (SELECT count(*) FROM ((SELECT $MODES_COLS FROM orders o JOIN items i $MODES_ON)
	                        EXCEPT ALL TABLE keyed_view) m) + (SELECT count(*) FROM (TABLE keyed_view
	                        EXCEPT ALL (SELECT $MODES_COLS FROM orders o JOIN items i $MODES_ON)) e)")
	q -c "SELECT delta_join.drop_view('keyed_view')" >/dev/null || die "drop_view(keyed_view) failed"
}

# Seconds of one REFRESH MATERIALIZED VIEW of a query (created first).
refresh_time() {
	local t0 secs
	settle
	q -c "CREATE MATERIALIZED VIEW refresh_mv AS $1" >/dev/null || die "CREATE MATERIALIZED VIEW failed"
	settle
	t0=$(now)
	q -c "REFRESH MATERIALIZED VIEW refresh_mv" >/dev/null || die "REFRESH failed"
	secs=$(calc "$(now) - $t0")
	q -c "DROP MATERIALIZED VIEW refresh_mv" >/dev/null
	echo "$secs"
}

# Step 10.  Needs the hot merchant (hot_merchant.sql).
cache_step() {
	local opts
	dj_say "10. the lookup cache: backlog of $BURST updates of the hot merchant's orders, cache off then on"
	for opts in off on; do
		if [ $opts = on ]; then
			opts='{"cache_enabled": true, "left_cache_size": 10000, "right_cache_size": 10000}'
		else
			opts='{}'
		fi
		q -c "SELECT delta_join.create_view('cache_view', \$q\$ $JOIN_QUERY \$q\$, options => '$opts')" >/dev/null ||
			die "create_view(cache_view) failed"
		burst backlog "cache_$([ "$opts" = '{}' ] && echo off || echo on)" cache_view update_hot.pgbench
		if [ "$opts" = '{}' ]; then
			C_OFF=$B_RATE
		else
			C_ON=$B_RATE
			# lookups counts the index scans done (a changed row is
			# fetched only when decoding did not keep it): the share of
			# lookups the cache answered
			C_HITS=$(q -c "SELECT round(100.0 * cache_hits / nullif(cache_hits + lookups, 0), 1)
			               FROM delta_join.status WHERE target = 'public.cache_view'")
		fi
		q -c "SELECT delta_join.drop_view('cache_view')" >/dev/null || die "drop_view(cache_view) failed"
	done
}

# Step 11: big transactions.  ROUNDS rounds (default 3) of: the bare
# UPDATE of BULK orders with no view, then the view made and the same
# UPDATE of the next BULK orders until the view is fresh, then the floor
# below, the view dropped but in the last round.  Each round changes orders
# no round changed before.  On this machine one measure swings by a third
# from one round to the next (the bare statement alone took 0.94 to 1.53
# s in one session): the verdict is on the median of the rounds' ratios,
# each round printed.
declare -a U_BARE U_STMT U_FRESH U_COPY
bulk_round() {	# round (0-based)
	local r=$1 t0 t1 t2 lo=$((2 * $1 * BULK))
	settle
	t0=$(now)
	q -c "UPDATE orders SET amount = amount + 1 WHERE order_id > $lo AND order_id <= $lo + $BULK" >/dev/null ||
		die "bare UPDATE failed"
	U_BARE[r]=$(calc "$(now) - $t0")
	q -c "SELECT delta_join.create_view('order_item_wide', \$q\$ $JOIN_QUERY \$q\$)" >/dev/null ||
		die "create_view(order_item_wide) failed"
	wait_view order_item_wide
	# the target as settle leaves orders: vacuumed (its hint bits and
	# visibility map set) and analyzed, so that autovacuum does not take it
	# up during the measure, as it otherwise does after the backfill
	q -c "VACUUM ANALYZE order_item_wide" >/dev/null || die "VACUUM of the target failed"
	settle
	lo=$((lo + BULK))
	t0=$(now)
	q -c "UPDATE orders SET amount = amount + 1 WHERE order_id > $lo AND order_id <= $lo + $BULK" >/dev/null ||
		die "UPDATE with the view failed"
	t1=$(now)
	wait_view order_item_wide
	t2=$(now)
	U_STMT[r]=$(calc "$t1 - $t0") U_FRESH[r]=$(calc "$t2 - $t0")

	# What that figure is made of at least: after its statement, the view
	# must write as many target rows as the statement wrote orders.  The
	# same UPDATE of a plain copy of the target (its indexes, its rows as
	# the backfill left them) is that write alone, done by SQL, with no
	# decoding and no lookup.
	q -c "CREATE TABLE wide_copy (LIKE order_item_wide INCLUDING INDEXES)" \
	  -c "INSERT INTO wide_copy SELECT * FROM order_item_wide" \
	  -c "VACUUM ANALYZE wide_copy" >/dev/null || die "copying the target failed"
	settle
	t0=$(now)
	q -c "UPDATE wide_copy SET amount = amount + 1 WHERE order_id > $lo AND order_id <= $lo + $BULK" \
		>/dev/null || die "UPDATE of the copy failed"
	U_COPY[r]=$(calc "$(now) - $t0")
	q -c "DROP TABLE wide_copy" >/dev/null || die "dropping the copy failed"
	if [ "$r" -lt $((BULK_ROUNDS - 1)) ]; then
		q -c "SELECT delta_join.drop_view('order_item_wide')" >/dev/null || die "drop_view failed"
	fi
}
bulk_step() {
	local r t0 t1 t2 pid peakf="$base/anon_peak" sampler
	BULK_ROUNDS=${ROUNDS:-3}
	[ $((2 * BULK_ROUNDS * BULK)) -le "$NORDERS" ] || die "ROUNDS=$BULK_ROUNDS rounds need more than $NORDERS orders"
	for r in $(seq 0 $((BULK_ROUNDS - 1))); do
		dj_say "11. round $((r + 1)) of $BULK_ROUNDS: $BULK-row UPDATE bare, then until the view is fresh"
		bulk_round "$r"
	done

	# the big transaction, with the worker's private memory sampled
	settle
	pid=$(worker_pid)
	echo 0 >"$peakf"
	( peak=0
	  while [ -r "/proc/$pid/status" ] && [ ! -e "$peakf.stop" ]; do
		a=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
		[ -n "$a" ] && [ "$a" -gt "$peak" ] && { peak=$a; echo "$peak" >"$peakf"; }
		sleep 0.1
	  done ) &
	sampler=$!
	BIG_ANON0=$(worker_mem | cut -d' ' -f2)
	t0=$(now)
	q -c "BEGIN" \
	  -c "INSERT INTO orders SELECT merchant_id, item_id, order_id + $NORDERS, amount FROM orders" \
	  -c "UPDATE orders SET amount = amount + 1 WHERE order_id <= $NORDERS" \
	  -c "COMMIT" >/dev/null || die "the big transaction failed"
	t1=$(now)
	wait_view order_item_wide
	t2=$(now)
	touch "$peakf.stop"
	wait "$sampler"
	BIG_ANON=$(cat "$peakf")
	BIG_STMT=$(calc "$t1 - $t0") BIG_FRESH=$(calc "$t2 - $t0")
	BIG_ROWS=$((2 * NORDERS))
	BIG_CHECK=$(q -c "SELECT (SELECT count(*) FROM (TABLE order_item_wide EXCEPT ALL
	                    SELECT merchant_id, order_id, item_id, item_name, amount FROM ($JOIN_QUERY) j) a)
	                + (SELECT count(*) FROM (SELECT merchant_id, order_id, item_id, item_name, amount
	                    FROM ($JOIN_QUERY) j EXCEPT ALL TABLE order_item_wide) b)") || die "comparing failed"
	q -c "SELECT delta_join.drop_view('order_item_wide')" >/dev/null || die "drop_view failed"
}

# Step 13: parallel apply (delta_join.apply_workers), each figure with the
# worker alone (1, the default) and with PAR_WORKERS processes (default: the
# CPUs), in the same run.  A warm-up batch before each measure starts the
# helpers (they start at the first large batch, and leave after a minute
# idle).
set_apply_workers() {
	q -c "ALTER SYSTEM SET delta_join.apply_workers = $1" -c "SELECT pg_reload_conf()" >/dev/null ||
		die "setting apply_workers failed"
	sleep 0.5
}
warm_up() {	# view
	q -c "UPDATE orders SET amount = amount + 1 WHERE order_id > $NORDERS - 5000" >/dev/null ||
		die "warm-up UPDATE failed"
	wait_view "$1"
}
declare -A P_FRESH P_JOIN P_AGG	# by apply_workers
parallel_step() {
	local w t0 lo=0
	dj_say "13. parallel apply, apply_workers 1 then $PAR_WORKERS: 100,000-row UPDATE until fresh, join and aggregate backlogs"
	settle
	t0=$(now)
	q -c "UPDATE orders SET amount = amount + 1 WHERE order_id <= $BULK" >/dev/null || die "bare UPDATE failed"
	P_BARE=$(calc "$(now) - $t0")
	q -c "SELECT delta_join.create_view('order_item_wide', \$q\$ $JOIN_QUERY \$q\$)" >/dev/null ||
		die "create_view(order_item_wide) failed"
	for w in 1 "$PAR_WORKERS"; do
		set_apply_workers "$w"
		warm_up order_item_wide
		settle
		lo=$((lo + BULK))
		t0=$(now)
		q -c "UPDATE orders SET amount = amount + 1 WHERE order_id > $lo AND order_id <= $lo + $BULK" >/dev/null ||
			die "UPDATE with the view failed"
		wait_view order_item_wide
		P_FRESH[$w]=$(calc "$(now) - $t0")
		burst backlog "par_join_$w" order_item_wide update_uniform.pgbench
		P_JOIN[$w]=$B_RATE
	done
	P_JOIN_CHECK=$(q -c "SELECT count(*) FROM (($JOIN_QUERY) EXCEPT ALL TABLE order_item_wide) m") ||
		die "comparing order_item_wide failed"
	q -c "SELECT delta_join.drop_view('order_item_wide')" >/dev/null || die "drop_view failed"
	q -c "SELECT delta_join.create_view('merchant_summary', \$q\$ $AGG_QUERY \$q\$)" >/dev/null ||
		die "create_view(merchant_summary) failed"
	for w in 1 "$PAR_WORKERS"; do
		set_apply_workers "$w"
		warm_up merchant_summary
		burst backlog "par_agg_$w" merchant_summary update_uniform.pgbench
		P_AGG[$w]=$B_RATE
	done
	P_AGG_CHECK=$(q -c "SELECT count(*) FROM ((($AGG_QUERY) EXCEPT ALL TABLE merchant_summary)
	                    UNION ALL (TABLE merchant_summary EXCEPT ALL ($AGG_QUERY))) d") ||
		die "comparing merchant_summary failed"
	q -c "SELECT delta_join.drop_view('merchant_summary')" >/dev/null || die "drop_view failed"
	set_apply_workers 1
}
parallel_report() {
	local n=$PAR_WORKERS f
	for w in 1 "$n"; do
		f=$(ratio "${P_FRESH[$w]}" "$P_BARE")
		row "13. UPDATE until fresh, apply_workers $w" "$(fmt "${P_FRESH[$w]}" 2) s" \
			"bare UPDATE $(fmt "$P_BARE" 2) s" "$f" "<= 2.0" "$(verdict "$f" "<=" 2.0)"
	done
	for w in 1 "$n"; do
		row "    join backlog, apply_workers $w" "$(fmt "${P_JOIN[$w]}") /s" "apply_workers 1" \
			"$(ratio "${P_JOIN[$w]}" "${P_JOIN[1]}")" ">= 80000" "$(verdict "${P_JOIN[$w]}" ">=" 80000)"
	done
	for w in 1 "$n"; do
		row "    agg uniform backlog, apply_workers $w" "$(fmt "${P_AGG[$w]}") /s" "apply_workers 1" \
			"$(ratio "${P_AGG[$w]}" "${P_AGG[1]}")" ">= 50000" "$(verdict "${P_AGG[$w]}" ">=" 50000)"
	done
	echo "checks: order_item_wide lacks $P_JOIN_CHECK rows of its query; merchant_summary differs in $P_AGG_CHECK rows"
}

# the median of the values on standard input, one a line
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
bulk_report() {
	local r f fl ratios="" floors=""
	for r in $(seq 0 $((BULK_ROUNDS - 1))); do
		f=$(ratio "${U_FRESH[r]}" "${U_BARE[r]}")
		fl=$(ratio "$(calc "${U_STMT[r]} + ${U_COPY[r]}")" "${U_BARE[r]}")
		ratios="$ratios$f"$'\n' floors="$floors$fl"$'\n'
		row "11. round $((r + 1)): bare UPDATE of $BULK orders" "$(fmt "${U_BARE[r]}" 2) s" "" "" "" ""
		row "    with the view, until fresh" "$(fmt "${U_FRESH[r]}" 2) s" "bare $(fmt "${U_BARE[r]}" 2) s" "$f" "" ""
		row "    ... of which the statement itself" "$(fmt "${U_STMT[r]}" 2) s" "" "" "" ""
		row "    the statement + the same UPDATE of a copy" "$(fmt "$(calc "${U_STMT[r]} + ${U_COPY[r]}")" 2) s" "bare $(fmt "${U_BARE[r]}" 2) s" "$fl" "" ""
	done
	f=$(printf '%s' "$ratios" | median)
	row "    until fresh / bare, median of $BULK_ROUNDS" "$(fmt "$f" 2)" "" "" "<= 2.0" "$(verdict "$f" "<=" 2.0)"
	row "    the floor / bare, median of $BULK_ROUNDS" "$(fmt "$(printf '%s' "$floors" | median)" 2)" "" "" "" ""
	row "    $BIG_ROWS-row transaction, until fresh" "$(fmt "$BIG_FRESH" 2) s" "statement $(fmt "$BIG_STMT" 2) s" "$(ratio "$BIG_FRESH" "$BIG_STMT")" "" ""
	row "    worker private memory, peak" "$(mb "$BIG_ANON")" "before $(mb "$BIG_ANON0")" "" "< 200 MB" "$(awk -v k="$BIG_ANON" 'BEGIN { print (k != "" && k < 200 * 1024) ? "ok" : "MISSED" }')"
	echo "checks: order_item_wide against its query after the big transaction: $BIG_CHECK differing rows"
}

# Step 3 alone: ROUNDS rounds of the three write runs, interleaved so that a
# drift of the machine hits each of them alike.
writes_step() {
	local r tn td tt
	q -f "$base/trigger_copy.sql" -c "DROP TABLE order_item_wide_trg" \
	  -c "DROP FUNCTION order_item_wide_trg_orders() CASCADE" \
	  -c "DROP FUNCTION order_item_wide_trg_items() CASCADE" >/dev/null || die "trigger copy dry run failed"
	write_run warmup >/dev/null || exit 1
	W_ROWS=""
	for r in $(seq 1 "${ROUNDS:-3}"); do
		dj_say "3. round $r: no view, delta view, trigger copy"
		tn=$(write_run none) || exit 1
		q -c "SELECT delta_join.create_view('order_item_wide', \$q\$ $JOIN_QUERY \$q\$)" >/dev/null ||
			die "create_view(order_item_wide) failed"
		wait_view order_item_wide
		td=$(write_run delta) || exit 1
		wait_view order_item_wide
		q -c "SELECT delta_join.drop_view('order_item_wide')" >/dev/null ||
			die "drop_view failed"
		q -f "$base/trigger_copy.sql" >/dev/null || die "trigger copy set-up failed"
		tt=$(write_run trigger) || exit 1
		q -c "DROP TABLE order_item_wide_trg" \
		  -c "DROP FUNCTION order_item_wide_trg_orders() CASCADE" \
		  -c "DROP FUNCTION order_item_wide_trg_items() CASCADE" >/dev/null || die "dropping the trigger copy failed"
		W_ROWS="$W_ROWS$r $tn $td $tt"$'\n'
	done
}

# Step 12 alone: the writers' cost and the lag under synchronous and
# asynchronous commits (issue 10), the commit mode set in the writers'
# sessions only.
commits_step() {
	local mode r tn td p50 p99
	write_run warmup >/dev/null || exit 1
	C_ROWS=""
	for mode in on off; do
		for r in $(seq 1 "${ROUNDS:-3}"); do
			dj_say "12. synchronous_commit = $mode, round $r: write TPS without and with the view"
			tn=$(PGOPTS="-c synchronous_commit=$mode" write_run none) || exit 1
			q -c "SELECT delta_join.create_view('order_item_wide', \$q\$ $JOIN_QUERY \$q\$)" >/dev/null ||
				die "create_view(order_item_wide) failed"
			wait_view order_item_wide
			td=$(PGOPTS="-c synchronous_commit=$mode" write_run delta) || exit 1
			wait_view order_item_wide
			p50="" p99=""
			if [ "$r" = 1 ]; then
				dj_say "12. synchronous_commit = $mode: lag at $RATE writes/s for ${DURATION}s"
				PGOPTS="-c synchronous_commit=$mode" lag_run "lag_$mode" order_item_wide update_uniform.pgbench
				p50=$L_P50 p99=$L_P99
			fi
			q -c "SELECT delta_join.drop_view('order_item_wide')" >/dev/null || die "drop_view failed"
			C_ROWS="$C_ROWS$mode $r $tn $td ${p50:--} ${p99:--}"$'\n'
		done
	done
}

commits_report() {
	local mode r tn td p50 p99
	while read -r mode r tn td p50 p99; do
		[ -n "$mode" ] || continue
		if [ "$p50" != - ]; then
			row "12. synchronous_commit=$mode: lag p50" "$(fmt "$p50" 1) ms" "" "" "< 10 ms" "$(verdict "$p50" "<" 10)"
			row "    lag p99" "$(fmt "$p99" 1) ms" "" "" "< 50 ms" "$(verdict "$p99" "<" 50)"
		fi
		row "    round $r: write TPS with the view" "$(fmt "$td")" "no view $(fmt "$tn")" "$(ratio "$td" "$tn")" \
			"$([ "$mode" = on ] && echo ">= 0.97" || echo ">= 0.90")" \
			"$(verdict "$(ratio "$td" "$tn")" ">=" "$([ "$mode" = on ] && echo 0.97 || echo 0.90)")"
	done <<<"$C_ROWS"
}

writes_report() {
	local r tn td tt
	while read -r r tn td tt; do
		[ -n "$r" ] || continue
		row "3. round $r: write TPS, no view" "$(fmt "$tn")" "" "" "" ""
		row "   delta view" "$(fmt "$td")" "no view $(fmt "$tn")" "$(ratio "$td" "$tn")" ">= 0.85" "$(verdict "$(ratio "$td" "$tn")" ">=" 0.85)"
		row "   trigger-maintained copy" "$(fmt "$tt")" "no view $(fmt "$tn")" "$(ratio "$tt" "$tn")" "" ""
	done <<<"$W_ROWS"
}

cache_report() {
	row "10. join apply, hot merchant, cache off" "$(fmt "$C_OFF") /s" "" "" "" ""
	row "    join apply, hot merchant, cache on" "$(fmt "$C_ON") /s" "cache off" "$(ratio "$C_ON" "$C_OFF")" ">= 1.3" "$(verdict "$(ratio "$C_ON" "$C_OFF")" ">=" 1.3)"
	row "    lookups answered by the cache" "${C_HITS:-n/a} %" "" "" "" ""
}

fallback_report() {
	row "9. REFRESH MATERIALIZED VIEW, DISTINCT join" "$(fmt "$F_REFRESH_S" 2) s" "" "" "" ""
	row "   full recompute of it, nothing changed" "$(fmt "$F_FULL_S" 2) s" "REFRESH" "$(ratio "$F_FULL_S" "$F_REFRESH_S")" "<= 1.3" "$(verdict "$(ratio "$F_FULL_S" "$F_REFRESH_S")" "<" 1.300001)"
	row "   ... rows it wrote" "$F_WRITTEN" "" "" "0" "$(verdict "$F_WRITTEN" "<" 0.5)"
	row "   REFRESH MATERIALIZED VIEW, the join" "$(fmt "$K_REFRESH_S" 2) s" "" "" "" ""
	row "   keyed, 0.1 % of orders changed" "$(fmt "$K_S_0_1" 2) s" "REFRESH" "$(ratio "$K_S_0_1" "$K_REFRESH_S")" "" ""
	row "   keyed, 1 % of orders changed" "$(fmt "$K_S_1" 2) s" "REFRESH" "$(ratio "$K_S_1" "$K_REFRESH_S")" "< 1" "$(verdict "$(ratio "$K_S_1" "$K_REFRESH_S")" "<" 1)"
	row "   keyed, 10 % of orders changed" "$(fmt "$K_S_10" 2) s" "REFRESH" "$(ratio "$K_S_10" "$K_REFRESH_S")" "" ""
	echo "checks: the paths were '$F_MODE' and '$K_MODE'; against their queries: the full view $F_CHECK," \
		"the keyed view $K_CHECK differing rows (times are from the update to wait(), the batch and the commit included)"
}

modes_report() {
	row "8. inner join, upsert (baseline)" "$(fmt "$MI_RATE") /s" "" "" "" ""
	row "   LEFT JOIN, upsert" "$(fmt "$ML_RATE") /s" "inner upsert" "$(ratio "$ML_RATE" "$MI_RATE")" "" ""
	row "   inner join, retract" "$(fmt "$MR_RATE") /s" "inner upsert" "$(ratio "$MR_RATE" "$MI_RATE")" ">= 0.67" "$(verdict "$(ratio "$MR_RATE" "$MI_RATE")" ">=" 0.67)"
	row "   LEFT JOIN, retract" "$(fmt "$MLR_RATE") /s" "inner upsert" "$(ratio "$MLR_RATE" "$MI_RATE")" "" ""
	echo "checks, mode views against their query: inner upsert $MI_CHECK; LEFT upsert $ML_CHECK;" \
		"inner retract $MR_CHECK; LEFT retract $MLR_CHECK (retract: 0 and 0; upsert: 0 missing)"
}

# STEPS=trees: the join's backlog with each tree installed in turn, ROUNDS
# rounds of TREES in order.  A switch installs the tree's library and
# scripts, restarts the server (the library is preloaded) and makes the
# extension again (the trees' scripts may differ); the view is made anew in
# every round, and dropped once its slot is gone.
declare -A T_RATES T_SUM T_CPUS T_CPU_SUM
trees_step() {
	local r t i ok order
	for r in $(seq 1 "${ROUNDS:-2}"); do
		# odd rounds in the order given, even rounds reversed: a load that
		# grows or falls during the run weighs on every tree alike
		order=$TREES
		[ $((r % 2)) -eq 0 ] && order=$(echo "$TREES" | tr ' ' '\n' | tac | tr '\n' ' ')
		for t in $order; do
			dj_say "round $r: $t"
			"$MAKE" --no-print-directory -C "$t" "PG_CONFIG=$PG_CONFIG" install >/dev/null ||
				die "installing $t failed"
			dj_as_pg "$bindir/pg_ctl" -D "$base/data" -l "$base/server.log" -w restart >/dev/null ||
				die "the server did not restart"
			q -c "DROP EXTENSION delta_join CASCADE" -c "CREATE EXTENSION delta_join" >/dev/null ||
				die "making the extension again failed"
			q -c "SELECT delta_join.create_view('order_item_wide', \$q\$ $JOIN_QUERY \$q\$)" >/dev/null ||
				die "create_view(order_item_wide) failed"
			burst backlog "tree_${r}_$(basename "$t")" order_item_wide update_uniform.pgbench
			T_RATES[$t]="${T_RATES[$t]:-}$(fmt "$B_RATE") "
			T_SUM[$t]=$(calc "${T_SUM[$t]:-0} + $B_RATE")
			T_CPUS[$t]="${T_CPUS[$t]:-}$(fmt "$B_CPU" 1) "
			T_CPU_SUM[$t]=$(calc "${T_CPU_SUM[$t]:-0} + ${B_CPU:-0}")
			q -c "SELECT delta_join.drop_view('order_item_wide')" >/dev/null || die "drop_view failed"
			# the worker drops the slot once the last view is gone
			for i in $(seq 1 300); do
				ok=$(q -c "SELECT count(*) = 0 FROM pg_replication_slots WHERE plugin = 'delta_join'")
				[ "$ok" = t ] && break
				sleep 0.1
			done
			[ "$ok" = t ] || die "the slot was not dropped after drop_view"
		done
	done
}
trees_report() {
	local t first="" mean first_mean="" cpu first_cpu=""
	for t in $TREES; do
		mean=$(calc "${T_SUM[$t]} / ${ROUNDS:-2}")
		cpu=$(calc "${T_CPU_SUM[$t]} / ${ROUNDS:-2}")
		[ -z "$first" ] && first=$t first_mean=$mean first_cpu=$cpu
		row "4. join backlog, $(basename "$t")" "$(fmt "$mean") /s" "$(basename "$first")" \
			"$(ratio "$mean" "$first_mean")" "" ""
		row "   worker CPU per change" "$(fmt "$cpu" 1) us" "$(basename "$first")" \
			"$(ratio "$cpu" "$first_cpu")" "" ""
	done
	for t in $TREES; do
		echo "rounds of $(basename "$t"): ${T_RATES[$t]% } per s; ${T_CPUS[$t]% } us of worker CPU per change"
	done
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- 1. load ----

dj_say "1. loading orders $NORDERS / items $NITEMS ($NMERCHANTS merchants)"
t0=$(now)
q "${sizes[@]}" -f "$base/schema.sql" >/dev/null || die "loading failed"
LOAD_S=$(calc "$(now) - $t0")

if [ "$STEPS" = cache ]; then
	q "${sizes[@]}" -f "$base/hot_merchant.sql" >/dev/null || die "loading the hot merchant failed"
	cache_step
	echo
	echo "delta_join benchmark, step 10  SCALE=$SCALE  $(nproc) cores  seed $SEED  load $LOAD_BEFORE"
	line
	row "figure" "value" "baseline" "ratio" "target" "verdict"
	line
	cache_report
	exit 0
fi
if [ "$STEPS" = bulk ]; then
	bulk_step
	echo
	echo "delta_join benchmark, step 11  SCALE=$SCALE  $(nproc) cores  seed $SEED  load $LOAD_BEFORE"
	echo "orders $NORDERS, items $NITEMS"
	line
	row "figure" "value" "baseline" "ratio" "target" "verdict"
	line
	bulk_report
	exit 0
fi
if [ "$STEPS" = parallel ]; then
	parallel_step
	echo
	echo "delta_join benchmark, step 13  SCALE=$SCALE  $(nproc) cores  seed $SEED  load $LOAD_BEFORE, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "orders $NORDERS, items $NITEMS; bursts $BURST updates x $BURST_CLIENTS clients, worker held, then released"
	line
	row "figure" "value" "baseline" "ratio" "target" "verdict"
	line
	parallel_report
	exit 0
fi
if [ "$STEPS" = commits ]; then
	commits_step
	echo
	echo "delta_join benchmark, step 12  SCALE=$SCALE  $(nproc) cores  seed $SEED  load $LOAD_BEFORE, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "orders $NORDERS, items $NITEMS; write runs ${DURATION}s x $CLIENTS clients; lag at $RATE writes/s"
	line
	row "figure" "value" "baseline" "ratio" "target" "verdict"
	line
	commits_report
	exit 0
fi
if [ "$STEPS" = writes ]; then
	writes_step
	echo
	echo "delta_join benchmark, step 3  SCALE=$SCALE  $(nproc) cores  seed $SEED  load $LOAD_BEFORE, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "orders $NORDERS, items $NITEMS; write runs ${DURATION}s x $CLIENTS clients"
	line
	row "figure" "value" "baseline" "ratio" "target" "verdict"
	line
	writes_report
	exit 0
fi
if [ "$STEPS" = fallback ]; then
	fallback_step
	echo
	echo "delta_join benchmark, step 9  SCALE=$SCALE  $(nproc) cores  seed $SEED  load $LOAD_BEFORE"
	echo "orders $NORDERS, items $NITEMS"
	line
	row "figure" "value" "baseline" "ratio" "target" "verdict"
	line
	fallback_report
	exit 0
fi
if [ "$STEPS" = trees ]; then
	trees_step
	echo
	echo "delta_join benchmark, step 4 by tree  SCALE=$SCALE  $(nproc) cores  seed $SEED  load $LOAD_BEFORE, at end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "orders $NORDERS, items $NITEMS; bursts $BURST updates x $BURST_CLIENTS clients, worker held, then released; ${ROUNDS:-2} rounds of: $TREES"
	line
	row "figure" "value" "baseline" "ratio" "target" "verdict"
	line
	trees_report
	exit 0
fi
if [ "$STEPS" = modes ]; then
	modes_step
	echo
	echo "delta_join benchmark, step 8  SCALE=$SCALE  $(nproc) cores  seed $SEED  load $LOAD_BEFORE"
	echo "orders $NORDERS, items $NITEMS; bursts $BURST updates x $BURST_CLIENTS clients, worker held, then released"
	line
	row "figure" "value" "baseline" "ratio" "target" "verdict"
	line
	modes_report
	exit 0
fi

# ---- 3a. writes without a view ----

dj_say "3a. write TPS, no view ($CLIENTS clients, ${DURATION}s, after an unmeasured warm-up run)"
write_run warmup >/dev/null || exit 1
TPS_A=$(write_run none) || exit 1

# ---- 2. backfill ----

dj_say "2. backfill: materialized view, CREATE TABLE AS, create_view"
settle
t0=$(now)
q -c "CREATE MATERIALIZED VIEW order_item_mv AS $JOIN_QUERY" >/dev/null || die "CREATE MATERIALIZED VIEW failed"
MV_CREATE_S=$(calc "$(now) - $t0")
q -c "CHECKPOINT" >/dev/null
t0=$(now)
q -c "REFRESH MATERIALIZED VIEW order_item_mv" >/dev/null || die "REFRESH failed"
MV_REFRESH_S=$(calc "$(now) - $t0")
q -c "DROP MATERIALIZED VIEW order_item_mv" -c "CHECKPOINT" >/dev/null
t0=$(now)
q -c "CREATE TABLE order_item_ctas AS $JOIN_QUERY" \
  -c "ALTER TABLE order_item_ctas ADD PRIMARY KEY (merchant_id, item_id, order_id)" >/dev/null ||
	die "CREATE TABLE AS failed"
CTAS_S=$(calc "$(now) - $t0")
q -c "DROP TABLE order_item_ctas" -c "CHECKPOINT" >/dev/null
t0=$(now)
q -c "SELECT delta_join.create_view('order_item_wide', \$q\$ $JOIN_QUERY \$q\$)" >/dev/null ||
	die "create_view(order_item_wide) failed"
CREATE_VIEW_S=$(calc "$(now) - $t0")
WIDE_ROWS=$(q -c "SELECT count(*) FROM order_item_wide")

# ---- 3b. writes with the delta view ----

dj_say "3b. write TPS with the delta join view"
wait_view order_item_wide
TPS_B=$(write_run delta) || exit 1
wait_view order_item_wide

# ---- 4 + 6. burst: apply throughput and worker memory ----

dj_say "4. apply throughput of order_item_wide: burst of $BURST updates, worker held, then released"
MEM_BEFORE=$(worker_mem)
burst backlog join_backlog order_item_wide update_uniform.pgbench
J_RATE=$B_RATE J_WRITE=$B_WRITE J_PEAK=$B_PEAK
MEM_AFTER=$(worker_mem)
dj_say "4. apply throughput of order_item_wide: burst of $BURST updates, worker running"
burst concurrent join_concurrent order_item_wide update_uniform.pgbench
J_CRATE=$B_RATE J_CWRITE=$B_WRITE J_CPEAK=$B_PEAK

# ---- 5. lag at a steady rate ----

dj_say "5. lag of order_item_wide at $RATE writes/s for ${DURATION}s"
lag_run join_lag order_item_wide update_uniform.pgbench
J_P50=$L_P50 J_P99=$L_P99 J_MAX=$L_MAX J_LRATE=$L_RATE J_N=$L_N
MEM_LAG=$(worker_mem)

# the wide table must equal the query now
WCOLS="merchant_id, order_id, item_id, item_name, amount"
DIFF=$(q -c "SELECT (SELECT count(*) FROM (SELECT $WCOLS FROM order_item_wide EXCEPT ALL
                      SELECT $WCOLS FROM ($JOIN_QUERY) j) a)
                 + (SELECT count(*) FROM (SELECT $WCOLS FROM ($JOIN_QUERY) j
                      EXCEPT ALL SELECT $WCOLS FROM order_item_wide) b)") || die "comparing order_item_wide failed"

if [ "$DIFF" != 0 ]; then
	dj_warn "order_item_wide differs from its query after wait(); some rows (side, row):"
	q -c "(SELECT 'target', $WCOLS FROM order_item_wide EXCEPT ALL
	        SELECT 'target', $WCOLS FROM ($JOIN_QUERY) j LIMIT 5)
	      UNION ALL
	      (SELECT 'query', $WCOLS FROM ($JOIN_QUERY) j EXCEPT ALL
	        SELECT 'query', $WCOLS FROM order_item_wide LIMIT 5)" >&2
	q -x -c "SELECT * FROM delta_join.status" >&2
	sleep 2
	wait_view order_item_wide
	DIFF2=$(q -c "SELECT (SELECT count(*) FROM (SELECT $WCOLS FROM order_item_wide EXCEPT ALL
	                      SELECT $WCOLS FROM ($JOIN_QUERY) j) a)")
	dj_warn "2 s and another wait() later, $DIFF2 target rows still differ"
	DIFF="$DIFF (after 2 s more: $DIFF2 stale rows)"
fi
q -c "SELECT delta_join.drop_view('order_item_wide')" >/dev/null || die "drop_view failed"

# ---- 3c. writes with the trigger-maintained copy ----

dj_say "3c. write TPS with a trigger-maintained copy"
q -f "$base/trigger_copy.sql" >/dev/null || die "trigger copy set-up failed"
TPS_C=$(write_run trigger) || exit 1
q -c "DROP TABLE order_item_wide_trg" \
  -c "DROP FUNCTION order_item_wide_trg_orders() CASCADE" \
  -c "DROP FUNCTION order_item_wide_trg_items() CASCADE" >/dev/null || die "dropping the trigger copy failed"

dj_say "3a'. write TPS, no view again (drift check)"
TPS_A2=$(write_run none2) || exit 1

# ---- 7. aggregate view alone ----

dj_say "7. merchant_summary: hot merchant 0 with $NHOT orders, then the view"
q "${sizes[@]}" -f "$base/hot_merchant.sql" >/dev/null || die "loading the hot merchant failed"
settle
t0=$(now)
q -c "SELECT delta_join.create_view('merchant_summary', \$q\$ $AGG_QUERY \$q\$)" >/dev/null ||
	die "create_view(merchant_summary) failed"
AGG_CREATE_S=$(calc "$(now) - $t0")

AMEM_BEFORE=$(worker_mem)
dj_say "7. merchant_summary: uniform burst, worker held, then released"
burst backlog agg_uniform merchant_summary update_uniform.pgbench
AU_RATE=$B_RATE AU_WRITE=$B_WRITE AU_PEAK=$B_PEAK
dj_say "7. merchant_summary: hot-merchant burst, worker held, then released"
burst backlog agg_hot merchant_summary update_hot.pgbench
AH_RATE=$B_RATE AH_WRITE=$B_WRITE AH_PEAK=$B_PEAK
dj_say "7. merchant_summary: uniform and hot bursts, worker running"
burst concurrent agg_uniform_c merchant_summary update_uniform.pgbench
AU_CRATE=$B_RATE AU_CWRITE=$B_WRITE
burst concurrent agg_hot_c merchant_summary update_hot.pgbench
AH_CRATE=$B_RATE AH_CWRITE=$B_WRITE
AMEM_AFTER=$(worker_mem)
dj_say "7. merchant_summary: lag at $RATE writes/s, uniform then hot"
lag_run agg_lag_uniform merchant_summary update_uniform.pgbench
AU_P50=$L_P50 AU_P99=$L_P99 AU_MAX=$L_MAX AU_LRATE=$L_RATE
lag_run agg_lag_hot merchant_summary update_hot.pgbench
AH_P50=$L_P50 AH_P99=$L_P99 AH_MAX=$L_MAX AH_LRATE=$L_RATE

ACOLS="merchant_id, order_count, total_amount"
ADIFF=$(q -c "SELECT (SELECT count(*) FROM (SELECT $ACOLS FROM merchant_summary EXCEPT ALL
                       SELECT $ACOLS FROM ($AGG_QUERY) g) a)
                  + (SELECT count(*) FROM (SELECT $ACOLS FROM ($AGG_QUERY) g EXCEPT ALL
                       SELECT $ACOLS FROM merchant_summary) b)") ||
	die "comparing merchant_summary failed"

# ---- 8. the join view in each mode, alone ----

q -c "SELECT delta_join.drop_view('merchant_summary', false)" >/dev/null ||
	die "drop_view(merchant_summary) failed"
modes_step

# ---- 9. the fallback paths ----

fallback_step

# ---- 10. the lookup cache ----

cache_step

# ---- the report ----

if [ "$ADIFF" != 0 ]; then
	dj_warn "merchant_summary differs from its query after wait(); some rows (side, row):"
	q -c "(SELECT 'target', $ACOLS FROM merchant_summary EXCEPT ALL
	        SELECT 'target', $ACOLS FROM ($AGG_QUERY) g LIMIT 5)
	      UNION ALL
	      (SELECT 'query', $ACOLS FROM ($AGG_QUERY) g EXCEPT ALL
	        SELECT 'query', $ACOLS FROM merchant_summary LIMIT 5)" >&2
fi

ERRORS=$(grep -cE ' (ERROR|FATAL|PANIC|WARNING): ' "$base/server.log")
VERSION=$(q -c "SHOW server_version")



read -r m0_rss m0_anon m0_hwm <<<"$MEM_BEFORE"
read -r m1_rss m1_anon m1_hwm <<<"$MEM_AFTER"
read -r m2_rss m2_anon m2_hwm <<<"$MEM_LAG"
read -r a0_rss a0_anon a0_hwm <<<"$AMEM_BEFORE"
read -r a1_rss a1_anon a1_hwm <<<"$AMEM_AFTER"

# the no-view baseline is the mean of the runs before (3a) and after (3a'),
# which cancels a steady drift of the machine over the run
TPS_0=$(calc "($TPS_A + $TPS_A2) / 2")
R_BA=$(ratio "$TPS_B" "$TPS_0")
R_CA=$(ratio "$TPS_C" "$TPS_0")
R_BF=$(ratio "$CREATE_VIEW_S" "$MV_REFRESH_S")
R_HOT=$(ratio "$AU_RATE" "$AH_RATE")
R_HOT_C=$(ratio "$AU_CRATE" "$AH_CRATE")

echo
echo "delta_join benchmark  SCALE=$SCALE  PostgreSQL $VERSION  $(nproc) cores  seed $SEED"
echo "load average (1/5/15 min) at start $LOAD_BEFORE, at end $(cut -d' ' -f1-3 /proc/loadavg):" \
	"other work on this machine makes every figure noisy"
echo "orders $NORDERS, items $NITEMS, $NMERCHANTS merchants; write runs ${DURATION}s x $CLIENTS clients;" \
	"bursts $BURST updates x $BURST_CLIENTS clients (synchronous_commit off in the burst sessions);" \
	"lag runs $RATE writes/s x $RATE_CLIENTS clients, sampled every ${SAMPLE_EVERY}s"
line
row "figure" "value" "baseline" "ratio" "target" "verdict"
line
row "1. load orders + items" "$(fmt "$LOAD_S" 1) s" "" "" "" ""
row "2. backfill create_view (${WIDE_ROWS} rows)" "$(fmt "$CREATE_VIEW_S" 2) s" "REFRESH MV $(fmt "$MV_REFRESH_S" 2) s" "$R_BF" "" ""
row "   (other baselines)" "" "CREATE MV $(fmt "$MV_CREATE_S" 2) s" "$(ratio "$CREATE_VIEW_S" "$MV_CREATE_S")" "" ""
row "" "" "CTAS + PK $(fmt "$CTAS_S" 2) s" "$(ratio "$CREATE_VIEW_S" "$CTAS_S")" "" ""
row "3a. write TPS, no view" "$(fmt "$TPS_A")" "" "" "" ""
row "3a'. write TPS, no view (last run)" "$(fmt "$TPS_A2")" "3a $(fmt "$TPS_A")" "$(ratio "$TPS_A2" "$TPS_A")" "" ""
row "3b. write TPS, delta view" "$(fmt "$TPS_B")" "no view $(fmt "$TPS_0") (mean)" "$R_BA" ">= 0.85" "$(verdict "$R_BA" ">=" 0.85)"
row "3c. write TPS, trigger-maintained copy" "$(fmt "$TPS_C")" "no view $(fmt "$TPS_0") (mean)" "$R_CA" "" ""
row "4. join apply, backlog (worker held)" "$(fmt "$J_RATE") /s" "peak 1 s $(fmt "$J_PEAK") /s" "" ">= 30000" "$(verdict "$J_RATE" ">=" 30000)"
row "   join apply, concurrent: burst / wait()" "$(fmt "$J_CRATE") /s" "burst writes $(fmt "$J_CWRITE") /s" "$(ratio "$J_CRATE" "$J_CWRITE")" "" ""
row "5. join lag p50 @ $RATE/s" "$(fmt "$J_P50" 1) ms" "achieved $(fmt "$J_LRATE") /s" "" "" ""
row "   join lag p99 (max $(fmt "$J_MAX") ms, $J_N samples)" "$(fmt "$J_P99" 1) ms" "" "" "< 500 ms" "$(verdict "$J_P99" "<" 500)"
row "6. worker RSS before burst" "$(mb "$m0_rss")" "private $(mb "$m0_anon")" "" "" ""
row "   worker RSS after burst" "$(mb "$m1_rss")" "private $(mb "$m1_anon")" "" "" ""
row "   worker RSS after lag run (peak)" "$(mb "$m2_rss")" "private $(mb "$m2_anon"), peak $(mb "$m2_hwm")" "" "" ""
row "7. agg create_view (merchant_summary)" "$(fmt "$AGG_CREATE_S" 2) s" "" "" "" ""
row "   agg apply, uniform, backlog" "$(fmt "$AU_RATE") /s" "peak 1 s $(fmt "$AU_PEAK") /s" "" "" ""
row "   agg apply, hot merchant, backlog" "$(fmt "$AH_RATE") /s" "peak 1 s $(fmt "$AH_PEAK") /s" "" "" ""
row "   agg uniform / hot, backlog" "$R_HOT" "" "" "<= 2" "$(verdict "$R_HOT" "<" 2.000001)"
row "   agg apply, uniform, concurrent" "$(fmt "$AU_CRATE") /s" "burst writes $(fmt "$AU_CWRITE") /s" "$(ratio "$AU_CRATE" "$AU_CWRITE")" "" ""
row "   agg apply, hot, concurrent" "$(fmt "$AH_CRATE") /s" "burst writes $(fmt "$AH_CWRITE") /s" "$(ratio "$AH_CRATE" "$AH_CWRITE")" "" ""
row "   agg uniform / hot, concurrent" "$R_HOT_C" "" "" "" ""
row "   agg lag uniform p50 / p99 @ $RATE/s" "$(fmt "$AU_P50" 1) / $(fmt "$AU_P99" 1) ms" "achieved $(fmt "$AU_LRATE") /s" "" "p99 < 500" "$(verdict "$AU_P99" "<" 500)"
row "   agg lag hot p50 / p99 @ $RATE/s" "$(fmt "$AH_P50" 1) / $(fmt "$AH_P99" 1) ms" "achieved $(fmt "$AH_LRATE") /s" "" "p99 < 500" "$(verdict "$AH_P99" "<" 500)"
row "   agg worker RSS before / after bursts" "$(mb "$a1_rss")" "before $(mb "$a0_rss"), private $(mb "$a0_anon") -> $(mb "$a1_anon")" "" "" ""
modes_report
fallback_report
cache_report
line
echo "checks: order_item_wide vs its query after the runs: $DIFF differing rows;" \
	"merchant_summary: $ADIFF; server log: $ERRORS ERROR/FATAL/PANIC/WARNING lines"
if [ "$ERRORS" -gt 0 ]; then
	grep -E ' (ERROR|FATAL|PANIC|WARNING): ' "$base/server.log" |
		sed -E 's/^.* (ERROR|FATAL|PANIC|WARNING): /\1: /' | sort | uniq -c | sort -rn | head -n 10
fi
exit 0
