#!/bin/sh
#
# test/server_conf.sh [POSTGRES [regress]] -- the postgresql.conf settings
# of every server the tests start, printed one per line.  The one place
# they are written:
#
#  - the Makefile writes .build/regress.conf from it for the pg_regress and
#    isolation servers (with "regress": parallel apply on there);
#  - DeltaJoinTest::settings reads it for each TAP test's servers;
#  - test/common.sh's dj_server_init appends it to the throwaway servers
#    of "make demo" and test/bench.
#
# POSTGRES is the server binary (default: postgres on PATH).  A delta_join
# server needs wal_level = logical and the library preloaded; servers from
# PostgreSQL 15.20 on only let the libraries named in
# output_plugin_libraries act as output plugins, while older minor
# releases do not know that parameter and would refuse to start with it:
# it is written only when the server has it.

postgres=${1:-postgres}

cat <<'EOF'
wal_level = 'logical'
shared_preload_libraries = 'delta_join'
max_replication_slots = '10'
max_worker_processes = '16'
EOF

if "$postgres" --describe-config 2>/dev/null | grep -q '^output_plugin_libraries[[:space:]]'; then
	echo "output_plugin_libraries = 'pgoutput, test_decoding, delta_join'"
fi

# pg_regress and isolation: the worker and one helper (parallel apply is
# off by default), so that the large batches of those tests go through it
if [ "${2:-}" = regress ]; then
	echo "delta_join.apply_workers = '2'"
fi
