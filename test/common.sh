# test/common.sh -- set-up shared by "make test" (run_tests.sh) and
# "make demo" (demo.sh).  Sourced, not run.
#
# What it knows:
#  - which Debian packages the build and the tests need, and how to install
#    them (only root may; anyone else gets the exact command to run);
#  - that PostgreSQL refuses to run as root, so servers and tests run as the
#    OS user "postgres" (dj_as_pg) when we are root;
#  - that a checkout may sit where "postgres" cannot enter or write (e.g.
#    under /root): dj_workdir then copies it to a temporary folder that user
#    owns.
#
# The caller sets DJ_ROOT (the top of the repository) and may set MAKE and
# PG_CONFIG.  Functions return non-zero on failure; none of them exits, so
# the caller decides what a failure means.

# The PostgreSQL major to build and test against: 15, or PG=17 / PG=18 (in
# a chroot made by test/chroot.sh when this machine does not have it).
# apt waits for a lock another apt holds (CI sets the chroots up beside
# the first run) instead of failing at once
DJ_APT_WAIT="-o DPkg::Lock::Timeout=900"

DJ_PG_MAJOR=${PG:-15}
MAKE=${MAKE:-make}

dj_say()  { printf '==> %s\n' "$*"; }
dj_warn() { printf 'delta_join: %s\n' "$*" >&2; }

dj_is_root() { [ "$(id -u)" -eq 0 ]; }

# The major's own pg_config; Debian's /usr/bin/pg_config wrapper picks the
# newest installed major version instead.
dj_find_pg_config() {
	if [ -z "${PG_CONFIG:-}" ] || ! command -v "$PG_CONFIG" >/dev/null 2>&1; then
		if [ -x "/usr/lib/postgresql/$DJ_PG_MAJOR/bin/pg_config" ]; then
			PG_CONFIG="/usr/lib/postgresql/$DJ_PG_MAJOR/bin/pg_config"
		else
			PG_CONFIG=pg_config
		fi
	fi
	export PG_CONFIG
}

# The Debian packages still missing, space-separated (empty when none).
# PGXS and pg_regress come with the server's client package; the server
# headers are what postgresql-server-dev-15 adds.
dj_missing_packages() {
	local missing="" inc pgxs
	inc=$("$PG_CONFIG" --includedir-server 2>/dev/null) || inc=""
	pgxs=$("$PG_CONFIG" --pgxs 2>/dev/null) || pgxs=""
	if [ -z "$inc" ] || [ ! -f "$inc/postgres.h" ] || [ -z "$pgxs" ] || [ ! -f "$pgxs" ]; then
		missing="$missing postgresql-server-dev-$DJ_PG_MAJOR"
	fi
	perl -MIPC::Run -e 1 >/dev/null 2>&1 || missing="$missing libipc-run-perl"
	command -v prove >/dev/null 2>&1 || missing="$missing perl"
	command -v gcc >/dev/null 2>&1 || missing="$missing gcc"
	echo "${missing# }"
}

# Is the major asked for (PG=17, PG=18) one this machine lacks, so that
# test/chroot.sh must run the command in a chroot that has it?  (Inside that
# chroot, the major is installed.)
dj_major_elsewhere() {
	[ "$DJ_PG_MAJOR" != 15 ] &&
		! { [ -x "/usr/lib/postgresql/$DJ_PG_MAJOR/bin/postgres" ] &&
			[ -f "/usr/include/postgresql/$DJ_PG_MAJOR/server/postgres.h" ]; }
}

# Install what the build and the tests need, when missing.
dj_ensure_packages() {
	local missing
	dj_find_pg_config
	missing=$(dj_missing_packages)
	[ -z "$missing" ] && return 0

	if ! dj_is_root; then
		dj_warn "missing packages: $missing"
		dj_warn "install them as root with:  apt-get install -y $missing"
		return 1
	fi
	dj_say "installing $missing"
	# A fresh image may have no package lists yet: update once and retry.
	if ! DEBIAN_FRONTEND=noninteractive apt-get $DJ_APT_WAIT install -y $missing; then
		DEBIAN_FRONTEND=noninteractive apt-get $DJ_APT_WAIT update &&
			DEBIAN_FRONTEND=noninteractive apt-get $DJ_APT_WAIT install -y $missing ||
			return 1
	fi
	PG_CONFIG=""
	dj_find_pg_config
	missing=$(dj_missing_packages)
	if [ -n "$missing" ]; then
		dj_warn "still missing after apt-get: $missing"
		return 1
	fi
}

# Run a command as the OS user postgres when we are root, else as ourselves.
# Runs from / so that a working directory postgres cannot enter does not
# matter (callers pass absolute paths), with a TMPDIR postgres can write.
dj_as_pg() {
	if dj_is_root; then
		(cd / && runuser -u postgres -- env TMPDIR=/tmp "$@")
	else
		"$@"
	fi
}

# Does the tree need copying before postgres can run tests in it?  As root:
# unless postgres already owns it (a CI checkout made as postgres), yes; we
# never chown a checkout that root's git would then refuse to work in.
dj_needs_copy() {
	dj_is_root && [ "$(stat -c %U "$DJ_ROOT")" != postgres ]
}

# Build with warnings as errors, then install into the server.  The build
# runs as whoever will own the objects (postgres for its own checkout).
dj_build_install() {
	local mk=("$MAKE" --no-print-directory -C "$DJ_ROOT" "PG_CONFIG=$PG_CONFIG")

	dj_say "building delta_join"
	if dj_is_root && ! dj_needs_copy; then
		dj_as_pg "${mk[@]}" -j"$(nproc)" all || return 1
	else
		"${mk[@]}" -j"$(nproc)" all || return 1
	fi

	dj_say "installing delta_join into $("$PG_CONFIG" --pkglibdir)"
	if dj_is_root; then
		"${mk[@]}" install || return 1
	elif dj_installed_is_current; then
		dj_say "the installed delta_join is this build; not reinstalling"
	elif ! "${mk[@]}" install; then
		dj_warn "installing needs root: run 'make install' as root, then this again"
		return 1
	fi
}

# Citus for the tests that run it (test/t/030_citus.pl): installed already,
# or built from the vendored source beside the project (../shared/vendor/
# citus/build.sh, root, a few minutes).  Returns 1 when the build failed;
# without Citus and without its source, says so and returns 0 (the test
# skips itself).
DJ_CITUS_BUILD=${DJ_CITUS_BUILD:-$DJ_ROOT/../shared/vendor/citus/build.sh}
dj_ensure_citus() {
	if [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ]; then
		dj_say "Citus is installed: the Citus tests run"
		return 0
	fi
	if [ ! -f "$DJ_CITUS_BUILD" ]; then
		dj_say "Citus is not installed and $DJ_CITUS_BUILD is not there: the Citus tests are skipped"
		return 0
	fi
	if ! dj_is_root; then
		dj_say "Citus is not installed and building it needs root: the Citus tests are skipped"
		return 0
	fi
	# without the LLVM bitcode PGXS makes of each file beside its object, for
	# JIT inlining, which no test needs: half the build's CPU time (Citus
	# 13.2.2 on 2 cores: 129 s of CPU instead of 256)
	dj_say "building Citus with $DJ_CITUS_BUILD (a few minutes)"
	MAKEFLAGS="with_llvm=no" PG_CONFIG=$PG_CONFIG bash "$DJ_CITUS_BUILD" ||
		{ dj_warn "building Citus failed"; return 1; }
}

# Are the installed library, control file and scripts those of this tree?
dj_installed_is_current() {
	local f ext
	ext="$("$PG_CONFIG" --sharedir)/extension"
	cmp -s "$DJ_ROOT/delta_join.so" "$("$PG_CONFIG" --pkglibdir)/delta_join.so" || return 1
	for f in "$DJ_ROOT"/delta_join.control "$DJ_ROOT"/delta_join--*.sql; do
		cmp -s "$f" "$ext/$(basename "$f")" || return 1
	done
}

# Copy the tree (without .git and test output) to a new folder under /tmp
# owned by postgres; print its path.
dj_copy_tree() {
	local dst
	dst=$(mktemp -d /tmp/delta_join.XXXXXX) || return 1
	if ! tar -C "$DJ_ROOT" --exclude=./.git --exclude=./.build \
		--exclude=./tmp_check --exclude=./tmp_check_regress --exclude=./tmp_check_iso --exclude=./output_iso \
		--exclude=./results --exclude=./log --exclude=./demo_data \
		--exclude=./regression.diffs --exclude=./regression.out \
		-cf - . | tar -C "$dst" -xf -; then
		rm -rf "$dst"
		return 1
	fi
	chown -R postgres: "$dst" || { rm -rf "$dst"; return 1; }
	echo "$dst"
}

# Stop, at once, every server whose data directory lies below $1: left over
# by an interrupted earlier run, or by this one.
dj_stop_servers_below() {
	local pidfile
	[ -d "$1" ] || return 0
	find "$1" -name postmaster.pid -type f 2>/dev/null | while read -r pidfile; do
		dj_as_pg "$("$PG_CONFIG" --bindir)/pg_ctl" -D "$(dirname "$pidfile")" \
			-m immediate -w stop >/dev/null 2>&1 || true
	done
}

# Does this server have the output_plugin_libraries parameter (15.20+)?
dj_server_has_output_plugin_libraries() {
	"$("$PG_CONFIG" --bindir)/postgres" --describe-config 2>/dev/null |
		grep -q '^output_plugin_libraries[[:space:]]'
}

# ---- throwaway servers (make demo, test/bench/run.sh) ----

# A TCP port nothing listens on, in 5433-5532, or fail.  (The servers only
# listen on a socket directory; the port names the socket.)
dj_free_port() {
	local p
	for p in $(seq 5433 5532); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	dj_warn "no free port in 5433-5532"
	return 1
}

# dj_server_init DATADIR SOCKDIR PORT [SETTINGS]: initdb as postgres, then
# a configuration for delta_join: socket only, the settings of every test
# server (test/server_conf.sh: wal_level = logical, the library preloaded,
# output_plugin_libraries where the server has it...), then SETTINGS, lines
# of postgresql.conf.
dj_server_init() {
	local data=$1 sock=$2 port=$3 extra=${4:-} bindir conf
	bindir=$("$PG_CONFIG" --bindir)
	if ! dj_as_pg "$bindir/initdb" -D "$data" -U postgres -A trust \
		--no-sync -E UTF8 --locale=C >"$data.initdb.log" 2>&1; then
		cat "$data.initdb.log"
		return 1
	fi
	conf="
listen_addresses = ''
port = $port
unix_socket_directories = '$sock'
$(sh "$DJ_ROOT/test/server_conf.sh" "$bindir/postgres")
$extra"
	printf '%s\n' "$conf" | dj_as_pg tee -a "$data/postgresql.conf" >/dev/null
}

# dj_server_stop DATADIR: fast, or else immediate.
dj_server_stop() {
	local bindir
	bindir=$("$PG_CONFIG" --bindir)
	dj_as_pg "$bindir/pg_ctl" -D "$1" -m fast -w stop >/dev/null 2>&1 ||
		dj_as_pg "$bindir/pg_ctl" -D "$1" -m immediate -w stop >/dev/null 2>&1
}
