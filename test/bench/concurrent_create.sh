#!/bin/bash
#
# test/bench/concurrent_create.sh [NORDERS] -- the writers of the sources
# during create_view, blocking and concurrent (issue 21, "Measure").
#
# One throwaway server (as test/bench/run.sh), the sources of
# test/bench/schema.sql with NORDERS orders (default 1,000,000; 100 orders
# per merchant, 10 items per merchant).  Two pgbench clients update random
# orders (update_uniform.pgbench) throughout three runs:
#
#   1. no create: the writers' TPS alone;
#   2. create_view of the join of DESIGN.md section 1, blocking;
#   3. the same with concurrently => true;
#   4. the view then kept, maintained by the worker (no create): what
#      the view costs the writers once made, the floor of step 3's
#      catching up.
#
# The writers' TPS during a create is the average of pgbench's one-second
# progress reports that fall between the create's start and end.  It
# prints the writers' TPS during each create (and during the concurrent
# one's backfill, until the view is active) divided by their TPS alone,
# and the time of the concurrent backfill (until the view is active)
# divided by the blocking create's, and the whole concurrent create's (it
# returns once the worker has caught up with the changes held back during
# the fill, which the writers keep making) divided by the blocking one's.
#
# Environment: SEED (default 42), KEEP_LOG=path (the server log).
#
# Reproduce: sudo test/bench/concurrent_create.sh 1000000

set -u
set -o pipefail

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$DJ_ROOT/test/common.sh"
BENCH=$DJ_ROOT/test/bench

NORDERS=${1:-1000000}
NMERCHANTS=$((NORDERS / 100))
[ "$NMERCHANTS" -ge 1 ] || NMERCHANTS=1
IPM=10
SEED=${SEED:-42}
CLIENTS=2
SETTLE_S=3						# writers alone before and after each create

JOIN_QUERY='SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
  FROM orders AS o
  JOIN items  AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id'

if ! dj_ensure_packages || ! dj_build_install; then
	dj_warn "set-up failed"
	exit 1
fi
bindir=$("$PG_CONFIG" --bindir)

base=""
sock=""
started=""
writers=""

cleanup() {
	[ -n "$writers" ] && pkill -f 'bin/pgbench .*-D run ' 2>/dev/null
	if [ -n "$started" ]; then
		dj_server_stop "$base/data"
		started=""
	fi
	if [ -n "${KEEP_LOG:-}" ] && [ -n "$base" ] && [ -f "$base/server.log" ]; then
		cp "$base/server.log" "$KEEP_LOG"
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
	[ -n "$base" ] && [ -f "$base/server.log" ] && tail -n 30 "$base/server.log" >&2
	exit 1
}

base=$(mktemp -d /tmp/delta_join_bench.XXXXXX) || exit 1
sock=$(mktemp -d /tmp/delta_join_sock.XXXXXX) || exit 1
cp "$BENCH"/schema.sql "$BENCH"/update_uniform.pgbench "$base/" || exit 1
dj_is_root && { chown -R postgres: "$base" "$sock" || exit 1; }
port=$(dj_free_port) || exit 1

dj_say "server in $base, port $port"
dj_server_init "$base/data" "$sock" "$port" "
shared_buffers = '1GB'
max_wal_size = '8GB'
checkpoint_timeout = '30min'
synchronous_commit = 'off'" || die "initdb failed"
dj_as_pg "$bindir/pg_ctl" -D "$base/data" -l "$base/server.log" -w start >/dev/null ||
	die "the server did not start"
started=1

q() { dj_as_pg "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d bench "$@"; }
now() { date +%s.%N; }

dj_as_pg "$bindir/createdb" -h "$sock" -p "$port" -U postgres bench || die "createdb failed"
dj_say "loading $NORDERS orders"
q -v norders="$NORDERS" -v nmerchants="$NMERCHANTS" -v ipm="$IPM" -f "$base/schema.sql" >/dev/null ||
	die "loading failed"
q -c "VACUUM ANALYZE orders" -c "VACUUM ANALYZE items" -c "CHECKPOINT" ||
	die "VACUUM failed"
# the first view makes the slot: not part of what is measured
q -c "CREATE TABLE anchor (id int PRIMARY KEY)" \
	-c "SELECT delta_join.create_view('anchor_view', 'SELECT id FROM anchor')" >/dev/null ||
	die "the first view failed"

# Start the writers, with a progress report each second (epoch timestamps)
start_writers() {
	dj_as_pg "$bindir/pgbench" -n -M prepared -h "$sock" -p "$port" -U postgres \
		--random-seed="$SEED" -D norders="$NORDERS" -D nmerchants="$NMERCHANTS" \
		-D ipm="$IPM" -D run="$1" -f "$base/update_uniform.pgbench" -c "$CLIENTS" -j "$CLIENTS" \
		-T 3600 -P 1 --progress-timestamp bench >"$base/writers_$1.log" 2>&1 &
	writers=$!
	sleep "$SETTLE_S"
}

stop_writers() {
	sleep "$SETTLE_S"
	# pgbench runs as postgres, under runuser: found by its run variable
	# (which it splits at the '=' in its own argv).  SIGTERM, not SIGINT:
	# a job started in the background by a shell without job control (the
	# script run by nohup or from cron) ignores SIGINT, and pgbench then
	# runs on for its hour.
	pkill -f "bin/pgbench .*-D run $1 " 2>/dev/null
	wait "$writers" 2>/dev/null
	writers=""
}

# The writers' average TPS over their reports between $2 and $3 (epoch s)
tps_between() {
	awk -v from="$2" -v to="$3" '
		/^progress: [0-9.]+ s, [0-9.]+ tps/ {
			t = $2 + 0; tps = $4 + 0
			# a report covers the second before its timestamp
			if (t > from + 0.5 && t <= to + 0.5) { sum += tps; n++ }
		}
		END { if (n) printf "%.1f", sum / n; else print "nan" }' "$base/writers_$1.log"
}

settle() {
	q -c "VACUUM orders" -c "CHECKPOINT" >/dev/null || die "VACUUM failed"
}

# The CPU time the worker of database bench has used so far, in clock ticks
# (/proc/PID/stat: utime + stime)
worker_ticks() {
	local pid
	pid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'
	              AND datname = 'bench'")
	awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0
}

# The machine's CPU time so far, in clock ticks: "busy idle" (/proc/stat;
# iowait counts as idle)
machine_ticks() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat
}

# The writers for 10 s (as long as a create would take), no create meanwhile:
# their TPS into variable ${1}_tps, the share of a core the worker used
# meanwhile into ${1}_worker_cpu, and the cores the machine kept busy into
# ${1}_busy_cores
steady_writers() {
	local ticks machine0 machine1
	settle
	start_writers "$1"
	t0=$(now)
	ticks=$(worker_ticks)
	machine0=$(machine_ticks)
	sleep 10
	machine1=$(machine_ticks)
	ticks=$(( $(worker_ticks) - ticks ))
	t1=$(now)
	stop_writers "$1"
	eval "${1}_tps=$(tps_between "$1" "$t0" "$t1")"
	eval "${1}_worker_cpu=$(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v a="$t0" -v b="$t1" \
		'BEGIN { printf "%.2f", t / hz / (b - a) }')"
	eval "${1}_busy_cores=$(echo "$machine0 $machine1" | awk -v n="$(nproc)" \
		'{ printf "%.2f", n * ($3 - $1) / (($3 - $1) + ($4 - $2)) }')"
}

# 1. the writers alone
steady_writers alone
dj_say "writers alone: $alone_tps tps (the worker, whose one view reads no table they write: $alone_worker_cpu of a core; busy: $alone_busy_cores of $(nproc) cores)"

# Log the phase of the concurrent create (delta_join.progress) every 0.1 s
watch_phases() {
	while :; do
		echo "$(now) $(q -c "SELECT phase FROM delta_join.progress WHERE target = 'public.wide'")"
		sleep 0.1
	done >"$base/phases_$1.log" 2>/dev/null
}

# 2. and 3. one create each, then the view is dropped
measure_create() {	# name concurrently
	local watcher fill_end
	settle
	start_writers "$1"
	watch_phases "$1" &
	watcher=$!
	t0=$(now)
	q -c "SELECT delta_join.create_view('wide', \$q\$ $JOIN_QUERY \$q\$, concurrently => $2)" \
		>/dev/null || die "create_view ($1) failed"
	t1=$(now)
	kill "$watcher" 2>/dev/null
	wait "$watcher" 2>/dev/null
	stop_writers "$1"
	eval "${1}_tps=$(tps_between "$1" "$t0" "$t1")"
	eval "${1}_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
	# until the view was active (the first look at phase "catching up")
	fill_end=$(awk -v b="$t1" '$2 == "catching" && !t { t = $1 } END { printf "%.6f", (t ? t : b) }' \
		"$base/phases_$1.log")
	eval "${1}_fill_s=$(awk -v a="$t0" -v b="$fill_end" 'BEGIN { printf "%.3f", b - a }')"
	eval "${1}_fill_tps=$(tps_between "$1" "$t0" "$fill_end")"
}
drop_wide() {
	q -c "SELECT delta_join.drop_view('wide')" >/dev/null || die "drop_view failed"
}
measure_create blocking false
drop_wide
dj_say "blocking create: $(printf '%.2f' "$blocking_s") s, writers $blocking_tps tps"
measure_create concurrent true
dj_say "concurrent create: $(printf '%.2f' "$concurrent_s") s (active after $(printf '%.2f' "$concurrent_fill_s") s, then catching up), writers $concurrent_tps tps"

# 4. the writers with the view made, maintained by the worker: the floor
# of the catching up, which is that maintenance at the writers' full speed
steady_writers maintained
drop_wide
dj_say "writers with the view maintained: $maintained_tps tps (the worker: $maintained_worker_cpu of a core)"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a != "nan") printf "%.2f", a / b; else print "nan" }'; }
echo
echo "orders: $NORDERS, writers: $CLIENTS pgbench clients (single-row updates of orders)"
echo "writer TPS during blocking create / alone:   $(ratio "$blocking_tps" "$alone_tps")   (target: near 0)"
echo "writer TPS during concurrent create / alone: $(ratio "$concurrent_tps" "$alone_tps")   (target: >= 0.8)"
echo "  of which during the backfill / alone:      $(ratio "$concurrent_fill_tps" "$alone_tps")   (until the view is active; then the worker catches up with the writes)"
echo "concurrent backfill time / blocking:         $(ratio "$concurrent_fill_s" "$blocking_s")   (target: <= 1.5; until the view is active)"
echo "writer TPS with the view maintained / alone: $(ratio "$maintained_tps" "$alone_tps")   (after the create: what maintaining the view costs them on this machine)"
echo "concurrent create time / blocking:           $(ratio "$concurrent_s" "$blocking_s")   (with catching up on the writes made meanwhile)"
# What the machine allows: the writers alone kept alone_busy_cores busy; at
# 0.8 of their TPS they keep 0.8 of that, and the backfill (one backend, the
# blocking create's work) gets at most the rest, and at most one core
echo "least backfill ratio with writers at 0.8:     $(awk -v n="$(nproc)" -v b="$alone_busy_cores" \
	'BEGIN { c = n - 0.8 * b; if (c > 1) c = 1; if (c > 0) printf "%.2f", 1 / c; else print "inf" }')   (the writers alone kept $alone_busy_cores of $(nproc) cores busy; the backfill runs in one backend)"
