#!/bin/bash
#
# test/run_tests.sh -- what "make test" runs (and CI, through .ci/run).
#
#  1. installs missing build/test packages (root only; others are told the
#     apt-get command), builds with warnings as errors, installs the
#     extension into the server, and Citus from ../shared/vendor/citus when
#     it is not installed (for test/t/030_citus.pl);
#  2. checks that src/ calls one way through its layers (test/check_layers.pl,
#     one test, its violations printed when it fails), then
#     runs every pg_regress test (make regress_installcheck: a temporary server),
#     every isolation test (make isolation_installcheck: another) and every
#     TAP test (make prove_installcheck) as the OS user postgres,
#     in a copy of the tree under /tmp when postgres cannot work in this one;
#  3. prints the regression diffs of failed pg_regress tests, copies test
#     output back into the tree on failure, and ends with the line
#        <passed> passed, <failed> failed
#     counting one for the layers, one per pg_regress or isolation test plus one
#     per TAP assertion (a TAP file that dies, or a suite that cannot start,
#     counts as one failure).
#
# Exit status: 0 when nothing failed, 1 otherwise.  Every suite always runs.

set -u
set -o pipefail

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$DJ_ROOT/test/common.sh"

scratch=$(mktemp -d /tmp/delta_join_log.XXXXXX) || exit 1
work=""

cleanup() {
	if [ -n "${citus_pid:-}" ]; then
		kill "$citus_pid" 2>/dev/null
		wait "$citus_pid" 2>/dev/null
		citus_pid=""
	fi
	rm -f "${DJ_CITUS_DONE:-}" "${DJ_CITUS_DONE:-}.part"
	if [ -n "$work" ] && [ "$work" != "$DJ_ROOT" ]; then
		dj_stop_servers_below "$work"
		rm -rf "$work"
	fi
	rm -rf "$scratch"
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

# Report the totals as the last line of output, and exit with them.
finish() {
	local passed=$1 failed=$2
	cleanup
	trap - EXIT
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

# ---- set-up ----

# PG=17 or PG=18 on a machine without it: the same run, in a chroot that has it
if dj_major_elsewhere; then
	trap - EXIT INT TERM
	rm -rf "$scratch"
	exec bash "$DJ_ROOT/test/chroot.sh" "$DJ_PG_MAJOR" test
fi

if ! dj_ensure_packages || ! dj_build_install; then
	dj_warn "set-up failed; no test was run"
	finish 0 1
fi

# Citus (for test/t/030 and 031) is built -- minutes -- while the suites
# that do not need it run; the TAP tests that do wait for the file named in
# DJ_CITUS_DONE, which holds the build's exit status once it has ended
# (DeltaJoinTest::citus_pkglibdir); its output is shown after theirs.  A
# failed build counts as one failure; every other test still runs.
citus_failed=0
DJ_CITUS_DONE=$(mktemp -u /tmp/delta_join_citus.XXXXXX)
export DJ_CITUS_DONE
(
	dj_ensure_citus >"$scratch/citus.log" 2>&1
	echo $? >"$DJ_CITUS_DONE.part" && mv "$DJ_CITUS_DONE.part" "$DJ_CITUS_DONE"
) &
citus_pid=$!

if dj_needs_copy; then
	work=$(dj_copy_tree) || { dj_warn "could not copy the tree to /tmp"; finish 0 1; }
	dj_say "running the tests as postgres in $work"
	# output an earlier failed run copied back would now mislead
	rm -rf "$DJ_ROOT/regression.diffs" "$DJ_ROOT/regression.out" \
		"$DJ_ROOT/results" "$DJ_ROOT/log" "$DJ_ROOT/tmp_check/log"
else
	work=$DJ_ROOT
	# servers an interrupted earlier run may have left behind
	dj_stop_servers_below "$work/tmp_check_regress"
	dj_stop_servers_below "$work/tmp_check_iso"
	dj_stop_servers_below "$work/tmp_check"
fi

mk=("$MAKE" --no-print-directory -C "$work" "PG_CONFIG=$PG_CONFIG")

# A suite that hangs is stopped, and counts as failed, rather than holding
# up the whole run (CI has a time limit): each suite gets DJ_SUITE_TIMEOUT
# seconds (30 minutes; the TAP tests, the longest, took up to 16 on 2 slow
# cores, and Citus is now built beside them).  A TAP test file that hangs
# fails on its own first (DeltaJoinTest's alarm, 10 minutes).
suite_timeout=(timeout --kill-after=30 "${DJ_SUITE_TIMEOUT:-1800}")

# ---- layers ----

dj_say "the layers of src/ (test/check_layers.pl)"
if perl "$DJ_ROOT/test/check_layers.pl" >"$scratch/layers.log" 2>&1; then
	layers_passed=1 layers_failed=0
	tail -n 1 "$scratch/layers.log"
else
	layers_passed=0 layers_failed=1
	echo "---- test/check_layers.pl ----"
	cat "$scratch/layers.log"
	echo "---- end of test/check_layers.pl ----"
fi

# ---- pg_regress ----

dj_say "pg_regress tests"
rm -f "$work/regression.diffs"		# so that only this run's diffs are shown
dj_as_pg "${suite_timeout[@]}" "${mk[@]}" regress_installcheck 2>&1 | tee "$scratch/regress.log"
regress_rc=$?

# PostgreSQL 15 prints "test name ... ok"; later versions print TAP lines.
regress_passed=$(grep -cE '\.\.\. ok( |$)|^ok [0-9]+ ' "$scratch/regress.log")
regress_failed=$(grep -cE '\.\.\. FAILED|^not ok [0-9]+ ' "$scratch/regress.log")
if [ "$regress_rc" -ne 0 ] && [ "$regress_failed" -eq 0 ]; then
	dj_warn "pg_regress did not complete (see its output above)"
	regress_failed=1
fi
if [ -s "$work/regression.diffs" ]; then
	echo "---- regression.diffs ----"
	cat "$work/regression.diffs"
	echo "---- end of regression.diffs ----"
fi

# ---- isolation ----

dj_say "isolation tests"
rm -f "$work/output_iso/regression.diffs"
dj_as_pg "${suite_timeout[@]}" "${mk[@]}" isolation_installcheck 2>&1 | tee "$scratch/iso.log"
iso_rc=$?

iso_passed=$(grep -cE '\.\.\. ok( |$)|^ok [0-9]+ ' "$scratch/iso.log")
iso_failed=$(grep -cE '\.\.\. FAILED|^not ok [0-9]+ ' "$scratch/iso.log")
if [ "$iso_rc" -ne 0 ] && [ "$iso_failed" -eq 0 ]; then
	dj_warn "the isolation tests did not complete (see their output above)"
	iso_failed=1
fi
if [ -s "$work/output_iso/regression.diffs" ]; then
	echo "---- output_iso/regression.diffs ----"
	cat "$work/output_iso/regression.diffs"
	echo "---- end of output_iso/regression.diffs ----"
fi

# ---- TAP ----

dj_say "TAP tests"
dj_as_pg "${suite_timeout[@]}" "${mk[@]}" prove_installcheck 2>&1 | tee "$scratch/tap.log"
tap_rc=$?

# From prove's summary: "Files=N, Tests=N, ..." and, for each failed file,
# "file (Wstat: N ... Tests: N Failed: N)" (+ "Parse errors: ..." lines).
# Tests counts the assertions that ran, failed ones included; a file that
# fails without a failed assertion (died, bad plan) adds one failure.
read -r tap_total tap_assert_failed tap_file_failed tap_summary < <(awk '
	/^Files=[0-9]+, Tests=[0-9]+/ {
		split($2, t, "="); total = t[2] + 0; summary = 1
	}
	/\(Wstat: [0-9]+.*Tests: [0-9]+ Failed: [0-9]+\)/ {
		match($0, /Wstat: [0-9]+/); wstat = substr($0, RSTART + 7, RLENGTH - 7) + 0
		match($0, /Failed: [0-9]+\)/); nfail = substr($0, RSTART + 8, RLENGTH - 9) + 0
		asserts += nfail
		if (nfail == 0 && wstat != 0)
			files += 1
		pending = (nfail == 0 && wstat == 0)	# only a parse error can fail it now
		next
	}
	/^  Parse errors:/ && pending { files += 1; pending = 0 }
	END { print total + 0, asserts + 0, files + 0, summary + 0 }
' "$scratch/tap.log")
tap_passed=$((tap_total - tap_assert_failed))
tap_failed=$((tap_assert_failed + tap_file_failed))
if [ "$tap_rc" -ne 0 ] && [ "$tap_failed" -eq 0 ]; then
	dj_warn "the TAP tests did not complete (see their output above)"
	tap_failed=1
fi
if [ "$tap_summary" -eq 0 ] && [ "$tap_failed" -eq 0 ]; then
	dj_warn "prove printed no summary"
	tap_failed=1
fi

# ---- the Citus build (done by now unless no TAP test waited for it) ----

wait "$citus_pid"
citus_pid=""
cat "$scratch/citus.log"
[ "$(cat "$DJ_CITUS_DONE" 2>/dev/null)" = 0 ] || citus_failed=1

# ---- results ----

failed=$((layers_failed + regress_failed + iso_failed + tap_failed + citus_failed))
passed=$((layers_passed + regress_passed + iso_passed + tap_passed))

if [ "$failed" -ne 0 ] && [ "$work" != "$DJ_ROOT" ]; then
	# keep what explains the failure where the developer will look for it
	for f in regression.diffs regression.out results log output_iso tmp_check/log; do
		if [ -e "$work/$f" ]; then
			rm -rf "${DJ_ROOT:?}/$f"
			mkdir -p "$(dirname "$DJ_ROOT/$f")"
			cp -r "$work/$f" "$DJ_ROOT/$f"
		fi
	done
	dj_say "test output copied to $DJ_ROOT (regression.diffs, results/, log/, tmp_check/log/)"
fi

citus_note=""
[ "$citus_failed" -ne 0 ] && citus_note="; building Citus failed (1 failure)"
echo "layers: $layers_passed passed, $layers_failed failed;" \
	"pg_regress: $regress_passed passed, $regress_failed failed (tests);" \
	"isolation: $iso_passed passed, $iso_failed failed (tests);" \
	"TAP: $tap_passed passed, $tap_failed failed (assertions)$citus_note"
finish "$passed" "$failed"
