# delta_join: incremental wide tables for PostgreSQL 15, 17 and 18 (PGXS build)
#
#   make test        install what the build needs (apt), build, install, and
#                    run every pg_regress and TAP test as user postgres;
#                    .ci/run runs it for each major
#   make test PG=17, make test PG=18
#                    the same against that major, in a Debian chroot that
#                    test/chroot.sh makes (or reuses) when this machine
#                    lacks it
#   make demo        same set-up, then the worked example on a throwaway server
#   make / make install
#                    build / install against the server pg_config names
#   make installcheck
#                    pg_regress then TAP tests, as a user that may start a
#                    server (PGXS stops after the first failing suite)
#   make regress_installcheck, make isolation_installcheck,
#   make prove_installcheck
#                    one suite alone
#
# Every build uses -Werror.  The only warning PostgreSQL's own headers (15
# to 18) raise under -Wextra is -Wunused-parameter (inline functions and
# hooks that ignore arguments), so that one is turned off.

MODULE_big = delta_join
# src/ has a folder per layer (README, "Architecture"); headers are included
# by their layer's name: #include "apply/apply.h".
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*/*.c)))
PG_CPPFLAGS = -I$(srcdir)/src
# PGXS tracks no header dependencies: rebuild everything when a header changes
# (a stale object compiled against an older struct layout crashes).
DJ_HEADERS = $(wildcard src/*/*.h)
EXTENSION = delta_join
# Released install scripts stay as released; each new version adds an
# update script, and a fresh install runs them in order (see
# delta_join--0.1--0.2.sql).
DATA = delta_join--0.1.sql delta_join--0.1--0.2.sql
PGFILEDESC = "delta_join - incremental wide tables"

PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter

# pg_regress: every sql/NN_topic.sql, in name order, on a temporary server
# configured by test/server_conf.sh (the settings of every test server, in
# one place).  The temporary server lives outside tmp_check, which
# prove_installcheck deletes.
REGRESS = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_CONF = .build/regress.conf
REGRESS_PREP = $(REGRESS_CONF)
REGRESS_OPTS = --temp-config=$(REGRESS_CONF) --temp-instance=./tmp_check_regress

# Isolation tests: every test/isolation/specs/*.spec, on a temporary server
# configured as for pg_regress
ISOLATION = $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test/isolation --temp-config=$(REGRESS_CONF) \
	--temp-instance=./tmp_check_iso

# TAP: every test/t/*.pl, with test/perl on the include path (DeltaJoinTest),
# TAP_JOBS at a time (each file starts servers of its own, on ports and in
# folders of its own), the longest-numbered first: the crash and
# differential tests, which take longest, start early instead of ending
# the run alone.  Four at a time on 2 cores: the tests mostly wait (for
# servers, workers, timeouts), and at two at a time they used a quarter of
# the CPU (a PostgreSQL 15 run: 931 s, 425 s of CPU).
TAP_TESTS = 1
TAP_JOBS = 4
PROVE_TESTS = $(sort $(wildcard test/t/*.pl))

EXTRA_CLEAN = .build tmp_check_regress tmp_check_iso output_iso

# The major to build and test against: 15 unless PG=17 or PG=18 is given
# ("make test PG=18" runs in a chroot when this machine lacks that major:
# test/chroot.sh).  Prefer its own pg_config over Debian's wrapper, which
# picks the newest installed major version.
PG ?= 15
PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/$(PG)/bin/pg_config) pg_config)
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

ifneq ($(wildcard $(PGXS)),)
include $(PGXS)

$(OBJS): $(DJ_HEADERS)

# Makefile.global resets PROVE_FLAGS; "override" appends to any value given
# on the command line instead.
override PROVE_FLAGS += -I test/perl -j$(TAP_JOBS) --reverse --timer

regress_installcheck: $(REGRESS_PREP)
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)

isolation_installcheck: $(REGRESS_PREP)
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)

prove_installcheck:
	$(prove_installcheck)

else
# No PGXS yet (fresh machine): "make test" and "make demo" install it.
all install installcheck regress_installcheck isolation_installcheck prove_installcheck:
	@echo "PGXS not found ($(PG_CONFIG) --pgxs); run 'make test' as root, or: apt-get install -y postgresql-server-dev-15 libipc-run-perl" >&2
	@exit 1
endif

# The server binary the regression configuration is generated for
PG_POSTGRES = $(if $(bindir),$(bindir)/postgres,postgres)

$(REGRESS_CONF): test/server_conf.sh $(wildcard $(PG_POSTGRES))
	@mkdir -p $(dir $@)
	@sh test/server_conf.sh $(PG_POSTGRES) regress > $@.tmp && mv $@.tmp $@

test:
	@PG='$(PG)' PG_CONFIG='$(PG_CONFIG)' MAKE='$(MAKE)' bash test/run_tests.sh

demo:
	@PG_CONFIG='$(PG_CONFIG)' MAKE='$(MAKE)' bash test/demo.sh

.PHONY: test demo regress_installcheck isolation_installcheck prove_installcheck
