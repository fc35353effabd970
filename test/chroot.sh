#!/bin/bash
#
# test/chroot.sh -- run a command of this tree against another PostgreSQL
# major, in a Debian chroot that has it ("make test PG=17", "make test PG=18").
#
#   test/chroot.sh MAJOR setup          make the chroot, or check it is complete
#   test/chroot.sh MAJOR test           set up, then "make test" inside it
#   test/chroot.sh MAJOR run CMD...     set up, then CMD in a copy of the tree
#                                       inside it (e.g. test/bench/run.sh)
#
# Debian 12, where the project is developed, packages PostgreSQL 15 only:
#
#	17	Debian 13 (trixie)
#	18	Debian forky (debootstrap's sid script; its Release file may carry a
#		Valid-Until earlier than the clock, which apt is told to ignore)
#
# The chroots live in $DJ_CHROOT_DIR (default /var/lib/delta_join/chroot),
# one folder per major, outside any work tree, so that another clone on the
# same machine (CI's) reuses them.  Set-up is idempotent and survives an
# interrupted run: debootstrap writes into MAJOR.partial, renamed once it
# succeeded (a leftover .partial is removed first); packages are installed
# (again) until a marker that names the package list is written.  A lock
# keeps two runs from setting up or using one chroot at once.
#
# While a command runs, /proc and a tmpfs on /dev/shm (PostgreSQL's dynamic
# shared memory) are mounted in the chroot, and unmounted afterwards.  The
# tree (without .git or test output) is copied to /build/delta_join in it,
# the vendored Citus to /build/shared/vendor/citus (test/common.sh looks for
# it beside the tree); Citus is built there once and then reused.  Test
# output of a failed run is copied back into this tree.
#
# Needs root, debootstrap (installed when missing) and Debian's archive.

set -u
set -o pipefail

DJ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DJ_CHROOT_DIR=${DJ_CHROOT_DIR:-/var/lib/delta_join/chroot}
DJ_MIRROR=${DJ_MIRROR:-http://deb.debian.org/debian}

say()  { printf '==> %s\n' "$*"; }
warn() { printf 'delta_join: %s\n' "$*" >&2; }

major=${1:-}
action=${2:-}
[ $# -ge 2 ] && shift 2

case "$major" in
17) suite=trixie script="" ;;
18) suite=forky script=/usr/share/debootstrap/scripts/sid ;;
*)
	warn "no chroot is known for PostgreSQL '$major' (17 and 18 are)"
	exit 2 ;;
esac

root=$DJ_CHROOT_DIR/pg$major

# What the build, the tests, the benchmarks and Citus need (see
# ../shared/vendor/citus/build.sh for Citus's own list).
packages="postgresql-$major postgresql-server-dev-$major libipc-run-perl
	make gcc libc6-dev patch bc procps
	libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libicu-dev"
packages=$(echo $packages)
marker=$root/etc/delta_join-chroot

if [ "$(id -u)" -ne 0 ]; then
	warn "testing against PostgreSQL $major needs a chroot, which only root can make and enter"
	exit 1
fi

# ---- mounts ----

# Unmount whatever is mounted below $1, deepest first.
unmount_below() {
	local m
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts |
		sort -r | while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m"
		done
}

mounted=""
mount_chroot() {
	unmount_below "$root"
	mounted=$root
	mkdir -p "$root/proc" "$root/dev/shm" &&
		mount -t proc proc "$root/proc" &&
		mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
}

cleanup() {
	[ -n "$mounted" ] && unmount_below "$mounted"
	mounted=""
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

# (DJ_ALL_SEEDS, when set, goes through: DeltaJoinTest::seeds)
in_chroot() {
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
		${DJ_ALL_SEEDS:+DJ_ALL_SEEDS=$DJ_ALL_SEEDS} "$@"
}

# ---- set-up ----

setup_base() {
	[ -d "$root" ] && return 0
	if ! command -v debootstrap >/dev/null 2>&1; then
		say "installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y debootstrap ||
			{ DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 update &&
			  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y debootstrap; } ||
			return 1
	fi
	# an interrupted earlier run
	if [ -e "$root.partial" ]; then
		say "removing the incomplete $root.partial"
		unmount_below "$root.partial"
		rm -rf "$root.partial"
	fi
	say "debootstrap $suite into $root (a few minutes)"
	mkdir -p "$DJ_CHROOT_DIR"
	debootstrap --variant=minbase "$suite" "$root.partial" "$DJ_MIRROR" $script \
		>"$DJ_CHROOT_DIR/pg$major.debootstrap.log" 2>&1 || {
		tail -20 "$DJ_CHROOT_DIR/pg$major.debootstrap.log"
		warn "debootstrap failed (log: $DJ_CHROOT_DIR/pg$major.debootstrap.log)"
		return 1
	}
	mv "$root.partial" "$root"
}

setup_packages() {
	[ "$(cat "$marker" 2>/dev/null)" = "$packages" ] && return 0
	say "installing PostgreSQL $major and the build tools in the chroot (a few minutes)"
	# no service starts in the chroot, and no cluster is made on install
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	mkdir -p "$root/etc/postgresql-common/createcluster.d"
	echo "create_main_cluster = false" \
		>"$root/etc/postgresql-common/createcluster.d/delta_join.conf"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
	mount_chroot || return 1
	# an install interrupted earlier leaves dpkg half-way
	{ in_chroot dpkg --configure -a &&
		in_chroot apt-get -q -o Acquire::Check-Valid-Until=false update &&
		in_chroot apt-get -q -y --no-install-recommends install $packages; } \
		>"$DJ_CHROOT_DIR/pg$major.apt.log" 2>&1 || {
		tail -20 "$DJ_CHROOT_DIR/pg$major.apt.log"
		cleanup
		warn "installing packages in $root failed (log: $DJ_CHROOT_DIR/pg$major.apt.log)"
		return 1
	}
	cleanup
	echo "$packages" >"$marker"
}

setup() {
	mkdir -p "$DJ_CHROOT_DIR"
	exec 9>"$DJ_CHROOT_DIR/pg$major.lock"
	if ! flock -n 9; then
		say "waiting for another run that uses $root"
		flock 9
	fi
	setup_base && setup_packages || return 1
	say "chroot $root: $(in_chroot /usr/lib/postgresql/$major/bin/postgres --version)"
}

# ---- running ----

# Copy this tree and the vendored Citus into the chroot's /build.
copy_tree() {
	rm -rf "$root/build/delta_join"
	mkdir -p "$root/build/delta_join" "$root/build/shared/vendor" || return 1
	tar -C "$DJ_ROOT" --exclude=./.git --exclude=./.build \
		--exclude=./tmp_check --exclude=./tmp_check_regress --exclude=./tmp_check_iso \
		--exclude=./output_iso --exclude=./results --exclude=./log --exclude=./demo_data \
		--exclude=./regression.diffs --exclude=./regression.out --exclude='*.o' \
		--exclude='*.so' --exclude='*.bc' \
		-cf - . | tar -C "$root/build/delta_join" -xf - || return 1
	if [ -d "$DJ_ROOT/../shared/vendor/citus" ]; then
		rm -rf "$root/build/shared/vendor/citus"
		cp -r "$DJ_ROOT/../shared/vendor/citus" "$root/build/shared/vendor/citus"
	fi
}

# Test output of a failed run, where the developer looks for it.
copy_back() {
	local f
	for f in regression.diffs regression.out results log output_iso tmp_check/log; do
		if [ -e "$root/build/delta_join/$f" ]; then
			rm -rf "${DJ_ROOT:?}/$f"
			mkdir -p "$(dirname "$DJ_ROOT/$f")"
			cp -r "$root/build/delta_join/$f" "$DJ_ROOT/$f"
		fi
	done
}

run_in_chroot() {
	local rc
	copy_tree || { warn "could not copy the tree into $root"; return 1; }
	mount_chroot || { warn "could not mount /proc and /dev/shm in $root"; return 1; }
	# (not holding the lock: a server the command leaves behind must not)
	in_chroot bash -c 'cd /build/delta_join && exec "$@"' run "$@" 9>&-
	rc=$?
	cleanup
	return $rc
}

case "$action" in
setup)
	setup ;;
test)
	if ! setup; then
		warn "set-up of the PostgreSQL $major chroot failed; no test was run"
		echo "0 passed, 1 failed"
		exit 1
	fi
	run_in_chroot make --no-print-directory test "PG=$major"
	rc=$?
	[ $rc -ne 0 ] && copy_back
	exit $rc ;;
run)
	setup || exit 1
	run_in_chroot "$@" ;;
*)
	warn "usage: test/chroot.sh MAJOR setup|test|run [CMD...]"
	exit 2 ;;
esac
