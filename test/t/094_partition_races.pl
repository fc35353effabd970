# Two races around the partitions of a source and the cached checks of a
# view's apply.
#
# 1. A partition left "detach pending" (a DETACH PARTITION ... CONCURRENTLY
#    cancelled in its second transaction): queries leave it out once the
#    detach is visible, and so must the view's lookups, which read it
#    before (twice the rows of a join into it).
#
# 2. The check of the code a view runs (another role's function must not
#    run as the target's owner) is kept until an invalidation comes in.
#    The check's walk itself takes invalidations in, as it locks a view the
#    query reads: a change committed while it waits there, of a table it
#    had read already (a partition given statistics that call bob's
#    function, which the planner folds as the role that plans), must not be
#    taken as checked.  Bob holds a lock on his nested view so that the
#    walk waits there, adds the statistics, and commits.  The view must go
#    to error, and bob's function never run as alice.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('partition_races');

# ---- 1. a partition whose detach is pending ----

$node->safe_psql(
	'postgres', q{
	CREATE TABLE cp (k int PRIMARY KEY, name text) PARTITION BY RANGE (k);
	CREATE TABLE cp_1 PARTITION OF cp FOR VALUES FROM (0) TO (100);
	CREATE TABLE cp_2 PARTITION OF cp FOR VALUES FROM (100) TO (200);
	INSERT INTO cp SELECT g, 'n' || g FROM generate_series(0, 199, 10) g;
	CREATE TABLE cf (id int PRIMARY KEY, k int);
	CREATE INDEX ON cf (k);
	INSERT INTO cf SELECT g, g * 10 FROM generate_series(0, 19) g;
});

# an old snapshot keeps the detach waiting in its second transaction
my $old = $node->background_psql('postgres');
$old->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$old->query_safe('SELECT count(*) FROM cp');
my $detacher = $node->background_psql('postgres', on_error_stop => 0);
my $detacher_pid = $detacher->query_safe('SELECT pg_backend_pid()');
$detacher->query_until(qr/detaching/,
	"\\echo detaching\nALTER TABLE cp DETACH PARTITION cp_2 CONCURRENTLY;\n");
ok( $node->poll_query_until(
		'postgres', q{
		SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = 'cp_2'::regclass}),
	'pending: the detach waits in its second transaction');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($detacher_pid)");
$old->query_safe('COMMIT');
$old->quit;
$detacher->quit;
is( $node->safe_psql(
		'postgres', q{
		SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = 'cp_2'::regclass}),
	't', 'pending: cancelled, the partition stays detach pending');

my $pending_q = 'SELECT f.id, c.k, c.name FROM cf f JOIN cp c ON c.k = f.k';
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('vpend', '$pending_q', options => '{\"retract\": true}')");
$node->safe_psql('postgres', 'UPDATE cf SET k = k + 0');
is($node->safe_psql('postgres', "SELECT delta_join.wait('vpend', '60s')"), 't',
	'pending: the view is fresh');
is($node->safe_psql('postgres', "SELECT count(*) FROM ($pending_q) q"),
	'10', 'pending: the query leaves the partition out');
DeltaJoinTest::target_ok($node, 'vpend', $pending_q,
	'pending: the lookups leave it out too');

# ---- 2. a change committed while the owner check waits ----

$node->safe_psql(
	'postgres', q{
	SET client_min_messages = warning;
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN;
	GRANT CREATE ON SCHEMA public TO alice, bob;
	CREATE SEQUENCE public.ran_as_alice;
	GRANT USAGE, SELECT ON SEQUENCE ran_as_alice TO PUBLIC;
	SET ROLE bob;
	CREATE FUNCTION bobf(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$
	BEGIN
		IF current_user = 'alice' THEN PERFORM nextval('public.ran_as_alice'); END IF;
		RETURN $1;
	END $f$;
	CREATE TABLE bp (k int PRIMARY KEY, v int) PARTITION BY RANGE (k);
	CREATE TABLE bp_1 PARTITION OF bp FOR VALUES FROM (0) TO (100);
	CREATE TABLE bp_2 PARTITION OF bp FOR VALUES FROM (100) TO (200);
	CREATE VIEW bv2 AS SELECT g AS k, g AS w FROM generate_series(0, 199) g;
	CREATE VIEW bv AS SELECT k, sum(w) AS sw FROM bv2 GROUP BY k;
	INSERT INTO bp SELECT g, g FROM generate_series(0, 199) g;
	GRANT SELECT, UPDATE ON bp, bv, bv2 TO alice;
	RESET ROLE;
	SET ROLE alice;
	SELECT delta_join.create_view('av_full',
		'SELECT bp.k, bp.v, bv.sw FROM bp JOIN bv ON bv.k = bp.k', strategy => 'auto');
});
$node->safe_psql('postgres', 'SET ROLE bob; UPDATE bp SET v = v + 1 WHERE k = 1');
is($node->safe_psql('postgres', "SELECT delta_join.wait('av_full', '60s')"), 't',
	'owner check: the view is applied once (its check kept)');

# bob holds his nested view; an invalidation has the worker check again,
# and a change of bp has it apply: its walk waits for bv2
my $bob = $node->background_psql('postgres');
$bob->query_safe('SET ROLE bob');
$bob->query_safe('BEGIN');
$bob->query_safe('LOCK TABLE bv2 IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres',
	'CREATE TABLE some_table (x int); SET ROLE bob; UPDATE bp SET v = v + 1 WHERE k = 2');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT EXISTS (SELECT FROM pg_locks WHERE relation = 'bv2'::regclass AND NOT granted)}),
	'owner check: the worker waits for bob\'s view');
$bob->query_safe('CREATE STATISTICS bs1 ON (bobf(1) + k), v FROM bp_1');
$bob->query_safe('COMMIT');
$bob->quit;
for my $k (3 .. 5)
{
	$node->safe_psql('postgres', "SET ROLE bob; UPDATE bp SET v = v + 1 WHERE k = $k");
	$node->safe_psql('postgres', "SELECT delta_join.wait('av_full', '5s')");
}
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error' AND last_error ~ 'bobf.*belongs to role "bob"'
		FROM delta_join.status WHERE target = 'public.av_full'}),
	'owner check: the view is in error, bob\'s function named');
is($node->safe_psql('postgres', 'SELECT is_called FROM ran_as_alice'),
	'f', 'owner check: bob\'s function never ran as alice');

$node->stop;
done_testing();
