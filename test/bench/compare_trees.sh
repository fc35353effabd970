#!/bin/bash
#
# test/bench/compare_trees.sh -- the join's backlog apply rate (run.sh's
# step 4) of two commits, in one run, on the same server and data.
#
#   test/bench/compare_trees.sh [BEFORE [AFTER]]
#
# BEFORE is a commit (default f0651f7, the last one before issue 19's
# restructuring), checked out detached into a git worktree under /tmp and
# removed at the end, or a checkout's folder, used as it is; AFTER is a
# commit or a folder likewise, by default this checkout as it is.  run.sh then loads the data once and measures the
# backlog ROUNDS times (default 2) with each tree installed in turn --
# before, after, before, after -- and prints the rates and the ratio
# (STEPS=trees).  SCALE, ROUNDS, SEED, KEEP_LOG and PG_CONFIG are passed on;
# PostgreSQL 15 only.
#
# Each tree is installed into PG_CONFIG's PostgreSQL in turn: what is left
# installed at the end is the last tree measured, AFTER.

set -u

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$DJ_ROOT/test/common.sh"

BEFORE=${1:-f0651f7}
AFTER=${2:-}
made=()

cleanup() {
	local w
	for w in "${made[@]}"; do
		git -C "$DJ_ROOT" worktree remove --force "$w" >/dev/null 2>&1 ||
			dj_warn "could not remove the worktree $w"
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A detached worktree of a commit, under /tmp, or a checkout as it is;
# prints its path
checkout() {
	local dir
	if [ -d "$1" ]; then
		(cd "$1" && pwd)
		return
	fi
	dir=$(mktemp -d "/tmp/delta_join_tree_$1.XXXXXX") || return 1
	rmdir "$dir"
	git -C "$DJ_ROOT" worktree add --detach "$dir" "$1" >/dev/null 2>&1 || return 1
	echo "$dir"
}

before=$(checkout "$BEFORE") || { dj_warn "cannot check out $BEFORE"; exit 1; }
[ -d "$BEFORE" ] || made+=("$before")
if [ -n "$AFTER" ]; then
	after=$(checkout "$AFTER") || { dj_warn "cannot check out $AFTER"; exit 1; }
	[ -d "$AFTER" ] || made+=("$after")
else
	after=$DJ_ROOT
fi
dj_say "before: $BEFORE in $before; after: ${AFTER:-this checkout} in $after"

STEPS=trees TREES="$before $after" bash "$DJ_ROOT/test/bench/run.sh"
