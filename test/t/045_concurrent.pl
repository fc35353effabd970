# Concurrent create and refresh (issue 21; DESIGN.md section 5,
# "Concurrent backfill"; src/ops/concurrent.c).
#
#  - Views of every kind -- an inner join, an aggregate, an outer join and a
#    full recompute -- are created with concurrently => true, then refreshed
#    the same way, while pgbench writes random upserts and deletes to every
#    source; after wait() every target equals its query (the join views in
#    upsert mode: every row of the query present, every extra one residual).
#    Every write of the stream succeeds.
#  - A role with only SELECT on the sources cannot create the view blocking
#    (it may not lock them), and can concurrently.
#  - A cancel of the creator during the fill leaves nothing: no view, no
#    target, and the slot moves on past later writes.
#  - A failure in the fill (a division by zero in the query) is the
#    caller's error, with its SQLSTATE, and leaves nothing either.
#  - A terminated background worker of a create: its row leaves
#    delta_join.progress with it, the worker puts the view in error, and
#    refresh(concurrently) rebuilds it.
#  - A terminated creator leaves its worker to finish alone; a cancel of
#    the worker then leaves nothing, and its error is logged.
#  - An immediate shutdown of the server during the fill leaves the view
#    'backfilling' without its process: the worker puts it in error, the
#    slot moves on, refresh() rebuilds it and gives the target the key the
#    create would have made after its fill, drop_view removes it, and it
#    can be created again.
#  - While a create waits for a writer, a column can be added to a source
#    (the DDL guard does not ask for the target's key, made after the
#    fill, while the view is backfilling).
#  - The caller's lock_timeout ends a create's wait for writers (SQLSTATE
#    55P03), which leaves nothing.
#  - The view dropped, or a source dropped with CASCADE, while a create
#    waits for a writer: the create fails, naming the view, and leaves
#    nothing.
#  - Not in a transaction block.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $seed = 4545;
my $node = DeltaJoinTest::new_node('main');

DeltaJoinTest::worked_example($node, merchants => 10, items => 40, orders => 500);
$node->safe_psql(
	'postgres', q{
	CREATE INDEX ON orders (merchant_id, item_id);
	-- declared immutable so that a view may use it; waits while lock 7 is held
	CREATE FUNCTION held(numeric) RETURNS numeric LANGUAGE plpgsql IMMUTABLE AS
	  $$ BEGIN PERFORM pg_advisory_lock_shared(7); PERFORM pg_advisory_unlock_shared(7);
	     RETURN $1; END $$;
	-- the first view makes the slot
	CREATE TABLE anchor (id int PRIMARY KEY);
	SELECT delta_join.create_view('anchor_view', 'SELECT id FROM anchor');});
my $slot = 'delta_join_'
  . $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'postgres'");

# name => [ query, strategy, target_ok options ]
my %views = (
	wide => [ $DeltaJoinTest::wide_query, undef, mode => 'upsert' ],
	summary => [ $DeltaJoinTest::summary_query, undef ],
	items_orders => [
		q{SELECT i.merchant_id, i.item_id, i.item_name, o.merchant_id AS o_merchant,
    o.item_id AS o_item, o.order_id, o.amount
  FROM items i LEFT JOIN orders o ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id},
		undef,
		mode => 'upsert',
		sides => [ [ [ 'merchant_id', 'item_id' ], 'order_id' ] ]
	],
	names_sold => [
		q{SELECT DISTINCT o.merchant_id, i.item_name
  FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id},
		'auto'
	]);

my $pick = q{\set m random(1, 10)
\set i random(1, 40)
\set o random(1, 600)
\set a random(1, 1000000)
};
my $scripts = DeltaJoinWorkload::write_scripts(
	upsert_order => [
		4, $pick . q{INSERT INTO orders VALUES (:m, :i, :o, :a / 100.0)
  ON CONFLICT (merchant_id, item_id, order_id) DO UPDATE SET amount = excluded.amount;
}
	],
	delete_order => [
		2, $pick . q{DELETE FROM orders WHERE merchant_id = :m AND item_id = :i AND order_id = :o;
}
	],
	rename_item => [
		1, $pick . q{UPDATE items SET item_name = 'item ' || :i || ' v' || :a
  WHERE merchant_id = :m AND item_id = :i;
}
	]);

sub create_sql
{
	my ($name, $concurrently) = @_;
	my ($query, $strategy) = @{ $views{$name} };
	return "SELECT delta_join.create_view('$name', \$q\$ $query \$q\$"
	  . (defined $strategy ? ", strategy => '$strategy'" : '')
	  . ($concurrently ? ', concurrently => true' : '') . ')';
}

sub check_all
{
	my ($what) = @_;
	is($node->safe_psql('postgres', 'SELECT delta_join.wait()'), 't', "$what: wait()");
	foreach my $name (sort keys %views)
	{
		my ($query, $strategy, %opts) = @{ $views{$name} };
		DeltaJoinTest::target_ok($node, $name, $query, "$what: $name", %opts);
	}
}

# ---- create and refresh concurrently under a stream of writes ----

# (at a modest rate: the outer join's apply is slow, and each create and
# refresh waits until the worker has caught up with the view)
my $stream = DeltaJoinWorkload::pgbench_start($node, $scripts,
	seed => $seed, clients => 2, seconds => 10, rate => 50);
foreach my $name (sort keys %views)
{
	$node->safe_psql('postgres', create_sql($name, 1));
}
foreach my $name (sort keys %views)
{
	is($node->safe_psql('postgres',
			"SELECT delta_join.refresh('$name', concurrently => true) >= 0"),
		't', "refresh of $name concurrently");
}
my $res = DeltaJoinWorkload::pgbench_finish($stream);
ok($res->{rc} == 0 && $res->{failed} == 0 && $res->{processed} > 0,
	"the writers went on ($res->{processed} transactions, none failed)")
  or diag($res->{stderr});
is( $node->safe_psql('postgres',
		"SELECT string_agg(mode, ',' ORDER BY target) FROM delta_join.views WHERE target <> 'public.anchor_view'"),
	'delta,full recompute,delta,delta',
	'one view of each path');
check_all('created and refreshed concurrently under writes');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM delta_join.status WHERE state <> 'active' OR last_error IS NOT NULL"),
	'0', 'every view is active, with no error');
is($node->safe_psql('postgres', 'SELECT count(*) FROM delta_join.progress'),
	'0', 'no concurrent operation is left in delta_join.progress');

# ---- not in a transaction block ----

my ($ret, $out, $err) = $node->psql('postgres',
	"BEGIN; SELECT delta_join.refresh('wide', concurrently => true); COMMIT;");
like($err, qr/cannot run inside a transaction block/,
	'refresh concurrently is refused in a transaction block');

# ---- not in a read-only transaction ----
#
# The background worker writes in transactions of its own, which do not
# inherit the session's default_transaction_read_only: the call is refused,
# as the blocking create and refresh are, and CREATE INDEX CONCURRENTLY.

foreach my $case (
	[ 'create_view', "SELECT delta_join.create_view('read_only_wide', '$DeltaJoinTest::wide_query', concurrently => true)" ],
	[ 'refresh', "SELECT delta_join.refresh('wide', concurrently => true)" ])
{
	my ($function, $call) = @$case;

	($ret, $out, $err) = $node->psql('postgres',
		"SET default_transaction_read_only = on;\n$call;",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like(
		$err,
		qr/ERROR:  25006: cannot execute delta_join\.$function\(.*concurrently => true\) in a read-only transaction/,
		"$function concurrently is refused in a read-only transaction, with its SQLSTATE");
}
is( $node->safe_psql(
		'postgres', q{
		SELECT (to_regclass('read_only_wide') IS NULL)
		  || '|' || (SELECT count(*) FROM delta_join.progress)}),
	'true|0', 'a read-only session made nothing, and started no process');

# ---- a role with only SELECT on the sources ----

$node->safe_psql(
	'postgres', q{
	CREATE ROLE reader LOGIN;
	GRANT SELECT ON orders, items TO reader;
	GRANT CREATE ON SCHEMA public TO reader;});
($ret, $out, $err) = $node->psql('postgres',
	"SELECT delta_join.create_view('reader_wide', '$DeltaJoinTest::wide_query')",
	extra_params => [ '-U', 'reader' ]);
like($err, qr/permission denied to lock source/,
	'a reading role may not create a view blocking its writers');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT delta_join.create_view('reader_wide', '$DeltaJoinTest::wide_query', concurrently => true)",
	extra_params => [ '-U', 'reader' ]);
is($ret, 0, 'a reading role creates the view concurrently') or diag($err);
$node->safe_psql('postgres', q{UPDATE items SET item_name = item_name || '+' WHERE item_id = 3});
is($node->safe_psql('postgres', "SELECT delta_join.wait('reader_wide')"), 't', 'reader_wide: wait()');
DeltaJoinTest::target_ok($node, 'reader_wide', $DeltaJoinTest::wide_query,
	'a reading role\'s view', mode => 'upsert');
is( $node->safe_psql('postgres',
		"SELECT runs_as FROM delta_join.views WHERE target = 'public.reader_wide'"),
	'reader', 'it runs as the reading role');

# a role acting through SET ROLE as a group that may not log in
$node->safe_psql(
	'postgres', q{
	CREATE ROLE readers NOLOGIN;
	GRANT SELECT ON orders, items TO readers;
	GRANT CREATE ON SCHEMA public TO readers;
	GRANT readers TO reader;});
$node->safe_psql('postgres',
	"SET ROLE readers;\n"
	  . "SELECT delta_join.create_view('group_wide', '$DeltaJoinTest::wide_query', concurrently => true);",
	extra_params => [ '-U', 'reader' ]);
is( $node->safe_psql('postgres',
		"SELECT runs_as FROM delta_join.views WHERE target = 'public.group_wide'"),
	'readers', 'a role that may not log in, set by SET ROLE, creates concurrently');
DeltaJoinTest::target_ok($node, 'group_wide', $DeltaJoinTest::wide_query,
	'the view of a role set by SET ROLE', mode => 'upsert');

# ---- a cancel during the fill ----

my $held_query = q{SELECT o.merchant_id, o.order_id, o.item_id, held(o.amount) AS amount
  FROM orders o};

# Run $sql in psql in the background, in database $dbname, its output and
# errors into $out and $err; returns its harness.
sub start_psql
{
	my ($dbname, $sql, $out, $err) = @_;
	return IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-d', $node->connstr($dbname), '-c', $sql ],
		'<', \undef, '>', $out, '2>', $err);
}

# Start a concurrent create whose fill waits for lock 7; returns the
# creator's harness once the fill is under way.
sub start_held_create
{
	my ($holder, $out, $err, $target) = @_;
	$target //= 'held';
	my $qualified = $target =~ /\./ ? $target : "public.$target";
	$holder->query_safe('SELECT pg_advisory_lock(7)');
	my $h = start_psql('postgres',
		"SELECT delta_join.create_view('$target', \$q\$ $held_query \$q\$, concurrently => true)",
		$out, $err);
	ok( $node->poll_query_until(
			'postgres', qq{
			SELECT phase = 'backfilling' AND rows_expected > 0
			FROM delta_join.progress WHERE target = '$qualified'}),
		'delta_join.progress shows the fill, with the rows it expects');
	return $h;
}

# nothing of a view named held: no catalog row, no target, no query view
sub nothing_left
{
	my ($what) = @_;
	is( $node->safe_psql(
			'postgres', q{
			SELECT (SELECT count(*) FROM delta_join.views WHERE target = 'public.held')
			  || '|' || (to_regclass('public.held') IS NULL)
			  || '|' || (SELECT count(*) FROM delta_join.view_catalog)
			  || '|' || (SELECT count(*) FROM pg_class
				   WHERE relnamespace = 'delta_join'::regnamespace AND relkind = 'v'
				     AND relname LIKE '%.%')}),
		'0|true|7|7', "$what: nothing is left of the view");
}

# Has the target held its primary key?  A concurrent create makes it after
# the fill, in the fill's transaction; a refresh makes it if the fill never
# ended.
sub held_has_key
{
	my ($has, $what) = @_;
	is( $node->safe_psql(
			'postgres', q{
			SELECT count(*) FROM pg_index
			WHERE indrelid = 'public.held'::regclass AND indisprimary}),
		$has ? '1' : '0', $what);
}

# the slot confirms positions past a write made now
sub slot_moves
{
	my ($what) = @_;
	my $lsn = $node->safe_psql('postgres',
		"INSERT INTO anchor SELECT coalesce(max(id), 0) + 1 FROM anchor; SELECT pg_current_wal_lsn()");
	ok( DeltaJoinWorkload::poll_until(
			$node,
			"SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = '$slot'",
			30),
		"$what: the slot moves past later writes");
}

my $holder = $node->background_psql('postgres');
my ($cout, $cerr) = ('', '');
my $creator = start_held_create($holder, \$cout, \$cerr);
$node->safe_psql('postgres',
	q{UPDATE orders SET amount = amount + 1 WHERE order_id < 50});
DeltaJoinTest::cancel_client($node, "create_view('held'");
$creator->finish;
like($cerr, qr/canceling statement due to user request/, 'the creator is cancelled');
$holder->query_safe('SELECT pg_advisory_unlock(7)');
nothing_left('after a cancel');
slot_moves('after a cancel');

# ---- an error during the fill ----

($ret, $out, $err) = $node->psql(
	'postgres', q{
	SELECT delta_join.create_view('held', 'SELECT o.merchant_id, o.order_id, o.item_id,
	  o.amount / (o.order_id - 7) AS q FROM orders o', concurrently => true)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  22012: division by zero/,
	'an error of the fill is the caller\'s, with its SQLSTATE');
nothing_left('after an error');

# ---- drop_view() during the fill ----
#
# It waits for the fill's lock on the target, then drops the view; the
# create fails, naming the view, and leaves nothing (it returned the
# dropped target's oid as if it had made the view)

($cout, $cerr) = ('', '');
$creator = start_held_create($holder, \$cout, \$cerr);
my ($dout, $derr) = ('', '');
my $dropper = start_psql('postgres',
	"SELECT delta_join.drop_view('held')",
	\$dout, \$derr);
ok( $node->poll_query_until(
		'postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query LIKE '%drop_view(''held'')%'}),
	'drop_view() waits for the fill');
$holder->query_safe('SELECT pg_advisory_unlock(7)');
$dropper->finish;
$creator->finish;
like(
	$cerr,
	qr/delta view "held" was dropped or changed during its concurrent backfill/,
	'the view dropped during its fill: the create fails, naming the view');
nothing_left('after a drop during the fill');

# ---- the target dropped during the fill ----
#
# DROP TABLE of the target, or DROP SCHEMA ... CASCADE of its schema, waits
# for the fill's lock on it and, once the fill has committed, drops the
# target and with it the view (the guard's sql_drop).  The create fails as
# for a drop_view(), with its SQLSTATE and hint, not with an internal error
# about a relation it can no longer open.

$node->safe_psql('postgres', 'CREATE SCHEMA doomed');
foreach my $case (
	[ 'public.held', 'DROP TABLE public.held' ],
	[ 'doomed.held', 'DROP SCHEMA doomed CASCADE' ])
{
	my ($target, $ddl) = @$case;

	($cout, $cerr) = ('', '');
	$creator = start_held_create($holder, \$cout, \$cerr, $target);
	($dout, $derr) = ('', '');
	$dropper = start_psql('postgres', $ddl, \$dout, \$derr);
	ok( $node->poll_query_until(
			'postgres', qq{
			SELECT count(*) = 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query = '$ddl'}),
		"$ddl waits for the fill");
	$holder->query_safe('SELECT pg_advisory_unlock(7)');
	$dropper->finish;
	$creator->finish;
	unlike($derr, qr/ERROR/, "$ddl succeeds once the fill has committed");
	like(
		$cerr,
		qr/ERROR:  55000: delta view "\Q$target\E" was dropped or changed during its concurrent backfill.*HINT:  delta_join.views shows/s,
		"$ddl during the fill: the create fails, naming the view, with its SQLSTATE and a hint");
	is( $node->safe_psql(
			'postgres', qq{
			SELECT (SELECT count(*) FROM delta_join.view_catalog
				WHERE target::regclass::text LIKE '%held')
			  || '|' || (to_regclass('$target') IS NULL)
			  || '|' || (SELECT count(*) FROM delta_join.progress)}),
		'0|true|0', "$ddl during the fill: no view, no target, no process left");
}

# ---- wait() while a concurrent create or refresh fills ----
#
# The worker holds the view's changes back until the fill is done, and the
# target is empty (create) or stale (refresh) until then: wait() on the
# view, or on every view, does not say it is fresh -- false at its timeout
# -- and says true once the operation has ended, the target equal to its
# query.

# wait() on view held with timeout $timeout, in test $what
sub wait_held
{
	my ($timeout, $expected, $what) = @_;
	is($node->safe_psql('postgres', "SELECT delta_join.wait('held', '$timeout')"),
		$expected, $what);
}

# The held operation $operation ends: wait() says true, and the target
# equals its query
sub release_held
{
	my ($operation) = @_;
	$holder->query_safe('SELECT pg_advisory_unlock(7)');
	$creator->finish;
	wait_held('30s', 't', "wait() once the concurrent $operation has ended");
	DeltaJoinTest::target_ok($node, 'held', $held_query,
		"after a wait() during its concurrent $operation", mode => 'upsert');
}

($cout, $cerr) = ('', '');
$creator = start_held_create($holder, \$cout, \$cerr);
wait_held('1s', 'f', 'wait() on a view that a concurrent create fills: false at its timeout');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '1s')"),
	'f', 'wait() on every view while one is filled: false at its timeout');
release_held('create');

$holder->query_safe('SELECT pg_advisory_lock(7)');
($cout, $cerr) = ('', '');
$creator = start_psql('postgres',
	"SELECT delta_join.refresh('held', concurrently => true)", \$cout, \$cerr);
ok( $node->poll_query_until(
		'postgres', q{
		SELECT phase = 'backfilling' FROM delta_join.progress WHERE target = 'public.held'}),
	'delta_join.progress shows the fill of the refresh');
$node->safe_psql('postgres', q{UPDATE orders SET amount = amount + 1 WHERE order_id = 3});
wait_held('1s', 'f',
	'wait() on a view that a concurrent refresh fills, after a write: false at its timeout');
release_held('refresh');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('held')");
nothing_left('after wait() during a concurrent create and refresh');

# ---- the backfill worker terminated during the fill ----

($cout, $cerr) = ('', '');
$creator = start_held_create($holder, \$cout, \$cerr);
my $filler = $node->safe_psql('postgres',
	"SELECT pid FROM delta_join.progress WHERE target = 'public.held'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($filler)");
$creator->finish;
like(
	$cerr,
	qr/the process of a concurrent create_view ended without finishing.*delta_join.refresh\(\) rebuilds/s,
	'the creator says its process ended without finishing, and that refresh() rebuilds the view');
is($node->safe_psql('postgres', 'SELECT count(*) FROM delta_join.progress'),
	'0', 'delta_join.progress shows no row for the terminated process');
wait_held('1s', 'f', 'wait() on a view whose concurrent create was terminated: false');
$holder->query_safe('SELECT pg_advisory_unlock(7)');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error' AND last_error ~ 'ended before the view was filled'
		FROM delta_join.status WHERE target = 'public.held'}),
	'the worker puts the view whose process was terminated in error');
held_has_key(0, 'a terminated create leaves its target without a key');
is( $node->safe_psql('postgres',
		"SELECT delta_join.refresh('held', concurrently => true) > 0"),
	't', 'refresh(concurrently) rebuilds the view an interrupted create left');
held_has_key(1, 'refresh(concurrently) gives the target its key');
$node->safe_psql('postgres', q{DELETE FROM orders WHERE order_id = 4});
is($node->safe_psql('postgres', "SELECT delta_join.wait('held')"), 't', 'held: wait() after its refresh');
DeltaJoinTest::target_ok($node, 'held', $held_query, 'refreshed concurrently after a terminated create',
	mode => 'upsert');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('held')");
nothing_left('after a terminated create, a refresh and drop_view');

# ---- the creator terminated during the fill ----
#
# Its background worker goes on alone: the view ends active.  Cancelled
# then, the worker leaves nothing, and its error is in the server log.

sub terminate_creator
{
	$node->safe_psql(
		'postgres', q{
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND query LIKE '%create_view(''held''%'
		  AND pid <> pg_backend_pid()});
}

($cout, $cerr) = ('', '');
$creator = start_held_create($holder, \$cout, \$cerr);
terminate_creator();
$creator->finish;
$holder->query_safe('SELECT pg_advisory_unlock(7)');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT (SELECT state FROM delta_join.status WHERE target = 'public.held') = 'active'
		  AND NOT EXISTS (SELECT FROM delta_join.progress)}),
	'the creator terminated, its worker finishes alone: the view is active');
is($node->safe_psql('postgres', "SELECT delta_join.wait('held')"), 't', 'held: wait() after its creator was terminated');
DeltaJoinTest::target_ok($node, 'held', $held_query, 'made by the worker of a terminated creator',
	mode => 'upsert');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('held')");

($cout, $cerr) = ('', '');
$creator = start_held_create($holder, \$cout, \$cerr);
terminate_creator();
$creator->finish;
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM delta_join.progress WHERE target = 'public.held'");
ok( $node->poll_query_until(
		'postgres', q{
		SELECT NOT EXISTS (SELECT FROM delta_join.views WHERE target = 'public.held')
		  AND NOT EXISTS (SELECT FROM delta_join.progress)}),
	'the creator terminated, a cancel of its worker ends the create');
$holder->query_safe('SELECT pg_advisory_unlock(7)');
nothing_left('after a cancel of the worker of a terminated creator');
ok($node->log_contains(qr/ERROR:  canceling statement due to user request/, $log_offset),
	'the error of the worker of a terminated creator is in the server log');

# ---- an immediate shutdown during the fill ----

($cout, $cerr) = ('', '');
$creator = start_held_create($holder, \$cout, \$cerr);
$node->stop('immediate');
$creator->finish;
$holder->quit;
$node->start;
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error' AND last_error ~ 'ended before the view was filled'
		FROM delta_join.status WHERE target = 'public.held'}),
	'after a crash, the worker puts the view left backfilling in error');
slot_moves('after a crash');
held_has_key(0, 'a create interrupted by a crash leaves its target without a key');
is($node->safe_psql('postgres', "SELECT delta_join.refresh('held') > 0"),
	't', 'after a crash, refresh() rebuilds the view an interrupted create left');
held_has_key(1, 'refresh() gives the target its key');
DeltaJoinTest::target_ok($node, 'held', $held_query, 'refreshed after the crash',
	mode => 'upsert');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('held')");
nothing_left('after a crash, a refresh and drop_view');
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('held', \$q\$ $held_query \$q\$, concurrently => true)");
$node->safe_psql('postgres', q{DELETE FROM orders WHERE order_id = 3});
is($node->safe_psql('postgres', "SELECT delta_join.wait('held')"), 't', 'held: wait()');
DeltaJoinTest::target_ok($node, 'held', $held_query, 'created again after the crash',
	mode => 'upsert');
held_has_key(1, 'a concurrent create gives the target its key');
check_all('after the crash');

# ---- a create that waited for a writer, and no write after it ----
#
# The writer's transaction wrote a source before the view was registered,
# so the fill waits for it.  Nothing writes a source afterwards: the end
# of the backfill is a write to delta_join's catalog only, which must
# still release what the worker held for the view -- wait() true, status
# with no reason left.  In a database of its own, where no other view
# (a full recompute's refresh_interval, say) makes the worker look again;
# its first view, a delta aggregate, makes the database's slot before the
# writer begins (making a slot waits for every transaction that has
# written).

$node->safe_psql('postgres', 'CREATE DATABASE lonely');
$node->safe_psql('lonely', 'CREATE EXTENSION delta_join');
DeltaJoinTest::worked_example($node, dbname => 'lonely');
$node->safe_psql('lonely',
	"SELECT delta_join.create_view('summary', '$DeltaJoinTest::summary_query')");
my $writer = $node->background_psql('lonely');
$writer->query_safe(
	q{BEGIN; UPDATE items SET item_name = item_name || '!' WHERE item_id = 4});
my ($wout, $werr) = ('', '');
my $waiting = start_psql('lonely',
	"SELECT delta_join.create_view('after_writer', '$DeltaJoinTest::wide_query', concurrently => true)",
	\$wout, \$werr);
ok( $node->poll_query_until(
		'lonely', q{
		SELECT phase = 'waiting for writers'
		FROM delta_join.progress WHERE target = 'public.after_writer'}),
	'after_writer: the create waits for the writer');
# the target gets its key after the fill: the DDL guard does not ask for
# it while the view is backfilling
($ret, $out, $err) =
  $node->psql('lonely', 'ALTER TABLE orders ADD COLUMN note text');
is($err, '', 'after_writer: a column added to a source while the create waits');
# but the target's shape is still checked
($ret, $out, $err) =
  $node->psql('lonely', 'ALTER TABLE after_writer ADD COLUMN extra int');
like($err, qr/delta view "public.after_writer" would no longer be correct.*more columns than the query outputs/s,
	'after_writer: a column added to the target while the create waits is refused');
# A view of the target made while the create waits: the fill's rows must
# reach it (they are not marked with the fill origin, which the worker's
# decoding skips, when a view reads the target)
$node->safe_psql('lonely',
	q{SELECT delta_join.create_view('over_after', 'SELECT merchant_id, item_id, count(*) AS n FROM after_writer GROUP BY merchant_id, item_id', strategy => 'none')});
($ret, $out, $err) = $node->psql('lonely',
	"SET statement_timeout = '5s'; SELECT delta_join.refresh('after_writer')");
like($err, qr/delta view "after_writer" is being backfilled/,
	'after_writer: a blocking refresh while the create runs is refused, not queued behind it');
# a target column's type changed must refresh the view (the rewrite
# converted its values): refused too, as that refresh would be
($ret, $out, $err) = $node->psql('lonely',
	"SET statement_timeout = '5s'; ALTER TABLE after_writer ALTER COLUMN amount TYPE numeric");
like($err, qr/cannot run ALTER TABLE: delta view "public.after_writer" is being backfilled.*must be refreshed because a column of its target/s,
	'after_writer: a target column retyped while the create runs is refused, not refreshed behind it');
$writer->query_safe('COMMIT');
$writer->quit;
$waiting->finish;
is($werr, '', 'after_writer: the create ends without an error');
is($node->safe_psql('lonely', "SELECT delta_join.wait('after_writer', '20s')"),
	't', 'after_writer: wait() is true with no write after the create');
is( $node->safe_psql(
		'lonely',
		"SELECT state || '|' || coalesce(reason, '') FROM delta_join.status WHERE target = 'public.after_writer'"),
	'active|', 'after_writer: active, and status gives no reason');
my $refreshed = $node->safe_psql('lonely',
	"SET statement_timeout = '60s'; SELECT delta_join.refresh('after_writer', concurrently => true) >= 0");
is($refreshed, 't', 'after_writer: a concurrent refresh right after it catches up');
DeltaJoinTest::target_ok($node, 'after_writer', $DeltaJoinTest::wide_query,
	'the view made after a writer', mode => 'upsert', dbname => 'lonely');
is($node->safe_psql('lonely', "SELECT delta_join.wait('over_after', '20s')"),
	't', 'over_after: wait() after the create it reads');
DeltaJoinTest::target_ok($node, 'over_after',
	'SELECT merchant_id, item_id, count(*) AS n FROM after_writer GROUP BY merchant_id, item_id',
	'a view made while the create of its source waited has the rows of the fill',
	dbname => 'lonely');
isnt($node->safe_psql('lonely', 'SELECT count(*) FROM over_after'), '0',
	'over_after is not empty');

# ---- the view, or a source, dropped while a create waits for a writer ----
#
# A writer of one source holds the create in "waiting for writers" while
# another session drops the view, or drops the other source with CASCADE
# (the DDL guard puts the view in error, and its query goes): the create
# fails, naming the view as the caller did, and leaves nothing.

$node->safe_psql(
	'postgres', q{
	CREATE TABLE s1 (id int PRIMARY KEY, k int);
	CREATE TABLE s2 (id int PRIMARY KEY, k int);
	CREATE INDEX ON s1 (k);
	CREATE INDEX ON s2 (k);
	INSERT INTO s1 SELECT g, g % 10 FROM generate_series(1, 100) g;
	INSERT INTO s2 SELECT g, g FROM generate_series(0, 9) g;});
my $s_query = 'SELECT s1.id AS i1, s2.id AS i2 FROM s1 JOIN s2 ON s1.k = s2.k';
my $s_writer = $node->background_psql('postgres');

# Start a concurrent create of $s_query into $name that waits for a writer
# of s2; returns the creator's harness once it waits.
sub start_waiting_create
{
	my ($name, $out, $err) = @_;
	$s_writer->query_safe('BEGIN; UPDATE s2 SET k = k WHERE id = 9');
	my $h = start_psql('postgres',
		"SELECT delta_join.create_view('$name', '$s_query', concurrently => true)",
		$out, $err);
	ok( $node->poll_query_until(
			'postgres', qq{
			SELECT phase = 'waiting for writers'
			FROM delta_join.progress WHERE target = 'public.$name'}),
		"$name: the create waits for the writer");
	return $h;
}

# nothing of a view into public.$name
sub no_view
{
	my ($name, $what) = @_;
	is( $node->safe_psql(
			'postgres', qq{
			SELECT (SELECT count(*) FROM delta_join.views WHERE target = 'public.$name')
			  || '|' || (to_regclass('public.$name') IS NULL)
			  || '|' || (SELECT count(*) FROM delta_join.progress)}),
		'0|true|0', "$what: nothing is left of the view");
}

# the caller's lock_timeout bounds the wait for writers, as it bounds
# CREATE INDEX CONCURRENTLY's (statement_timeout, far longer, only keeps the
# test from hanging without it)
$s_writer->query_safe('BEGIN; UPDATE s2 SET k = k WHERE id = 9');
($ret, $out, $err) = $node->psql(
	'postgres',
	"SET lock_timeout = '200ms'; SET statement_timeout = '60s';\n"
	  . "SELECT delta_join.create_view('s_timeout', '$s_query', concurrently => true)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
$s_writer->query_safe('COMMIT');
like(
	$err,
	qr/ERROR:  55P03: canceling statement due to lock timeout/,
	'the caller\'s lock_timeout ends the wait for writers, with its SQLSTATE');
no_view('s_timeout', 'a create whose wait for writers timed out');

foreach my $case (
	[ 's_gone', "SELECT delta_join.drop_view('s_gone')", 'the view dropped while its create waits' ],
	[ 's_dropped', 'DROP TABLE s1 CASCADE', 'a source dropped with CASCADE while the create waits' ])
{
	my ($name, $ddl, $what) = @$case;
	($cout, $cerr) = ('', '');
	$creator = start_waiting_create($name, \$cout, \$cerr);
	$node->safe_psql('postgres', $ddl);
	$s_writer->query_safe('COMMIT');
	$creator->finish;
	like(
		$cerr,
		qr/delta view "$name" was dropped or changed during its concurrent backfill/,
		"$what: the create fails, naming the view");
	no_view($name, $what);
}
$s_writer->quit;

# drop_view() while a create catches up: the create ends and leaves
# nothing.  The apply worker of the database (kept running by a view of its
# own; lonely has one too) is stopped while idle, so that the create waits
# in 'catching up' until the view is gone.  (With the worker running and
# applying the view, the create once waited for ever after such a drop:
# the worker kept the dropped view's entry in shared memory, which never
# advanced.  That needs the drop to land while the worker applies the
# view's backlog, which this test does not time; an attack did, with a
# writer's backlog.)  Cancelled here if it still waits.
$node->safe_psql(
	'postgres', q{
	CREATE TABLE s1 (id int PRIMARY KEY, k int);
	CREATE INDEX ON s1 (k);
	INSERT INTO s1 SELECT g, g % 10 FROM generate_series(1, 100) g;});
$node->safe_psql('postgres', "SELECT delta_join.create_view('s_kept', '$s_query')");
my $apply_pid;
$node->poll_query_until(
	'postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'delta_join worker' AND datname = 'postgres'});
$apply_pid = $node->safe_psql(
	'postgres', q{
	SELECT pid FROM pg_stat_activity
	WHERE backend_type = 'delta_join worker' AND datname = 'postgres'});
ok(DeltaJoinWorkload::stop_worker_idle($node, $apply_pid),
	'catching up: the apply worker is stopped while idle');
($cout, $cerr) = ('', '');
$creator = start_psql('postgres',
	"SELECT delta_join.create_view('s_catching', '$s_query', concurrently => true) IS NOT NULL",
	\$cout, \$cerr);
ok( $node->poll_query_until(
		'postgres', q{
		SELECT phase = 'catching up' FROM delta_join.progress WHERE target = 'public.s_catching'}),
	'the create catches up');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('s_catching')");
ok( DeltaJoinWorkload::poll_until(
		$node, 'SELECT count(*) = 0 FROM delta_join.progress', 20),
	'the view dropped while its create catches up: the create ends');
# (its progress row goes before the call returns: the cancel below, for a
# create that would not end, waits until the call has returned)
DeltaJoinWorkload::poll_until(
	$node, q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE query LIKE '%create_view(''s_catching''%' AND state = 'active' AND pid <> pg_backend_pid()}, 20);
kill 'CONT', $apply_pid;
$node->safe_psql(
	'postgres', q{
	SELECT pg_cancel_backend(pid) FROM pg_stat_activity
	WHERE query LIKE '%create_view(''s_catching''%' AND pid <> pg_backend_pid()});
$creator->finish;
chomp $cout;
is($cout, 't', '... and returns');
no_view('s_catching', 'a view dropped while its create caught up');

$node->stop;
done_testing();
