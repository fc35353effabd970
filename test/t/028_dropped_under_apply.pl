# Relations dropped under the apply worker.
#
# In a batch's transaction the worker reads the views from the catalog,
# then, view by view, builds the view's delta plan when it has none (a new
# worker, or after an invalidation), locks what the view reads, and
# applies it.  A DROP TABLE ... CASCADE of a source drops the view's query
# (its query view) with it, and may commit anywhere in between:
#
#  - while the worker builds the plan: the worker loaded the query, the
#    DROP took the source away, and the analysis looked the source up by
#    name, found none and crashed (signal 11 in quote_identifier, from
#    make_source).  A Citus node does this all the time: its cleanup drops
#    the shards of a group that moved or split away, with CASCADE, while
#    the node's worker may be applying the group's view (TAP 031 crashed
#    so during a shard split).  The analysis locks what the query reads
#    before it looks at it: the DROP waits for the worker's batch;
#  - after the views were read and before the view's locks: the view is
#    gone, or in error, when the worker gets its locks; it is not applied,
#    and nothing is said of it beyond what the DROP did.
#
# Each interleaving is made with locks held by sessions of the test: a
# view the query reads (inlined by the analysis after the source), or the
# target of a view applied before, so that the worker waits there while
# the DROP runs.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('dropped');
$node->safe_psql(
	'postgres', q{
	CREATE TABLE s (k int PRIMARY KEY, v int);
	CREATE TABLE u (k int PRIMARY KEY, w int);
	CREATE VIEW vu AS SELECT k, w FROM u;
	CREATE TABLE other (k int PRIMARY KEY, v int);
	INSERT INTO s SELECT g, g FROM generate_series(1, 10) g;
	INSERT INTO u SELECT g, 10 * g FROM generate_series(1, 20) g;
	INSERT INTO other SELECT g, g FROM generate_series(1, 10) g;
	SELECT delta_join.create_view('t', 'SELECT s.k, s.v, vu.w FROM s JOIN vu ON vu.k = s.k');
	SELECT delta_join.create_view('o', 'SELECT k, v FROM other');});
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'the views are fresh');

# The pid of the apply worker, once one runs that is not $old
sub worker_pid
{
	my ($old) = @_;
	$node->poll_query_until(
		'postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'delta_join worker' AND pid <> $old})
	  or die 'no apply worker runs';
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'");
}

# ---- a source dropped while the worker builds the view's plan ----

# a new worker, which has no plan yet
my $worker = worker_pid(0);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($worker)");
$worker = worker_pid($worker);

my $holder = $node->background_psql('postgres');
my $holder_pid = $holder->query_safe('SELECT pg_backend_pid()');
my $dropper = $node->background_psql('postgres');
my $dropper_pid = $dropper->query_safe('SELECT pg_backend_pid()');
$dropper->query_safe('SET client_min_messages = warning');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK TABLE vu IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres', 'INSERT INTO s VALUES (11, 11)');

# the worker analyzes the query of t, and waits for vu (for less than its
# lock_timeout)
ok( $node->poll_query_until(
		'postgres', "SELECT $holder_pid = ANY (pg_blocking_pids($worker))"),
	'plan: the worker builds the plan of t and waits for the view it reads');

# the DROP either waits for the worker, which holds s, or (before the fix)
# commits at once
$dropper->query_until(qr/dropping/, "\\echo dropping\nDROP TABLE s CASCADE;\n");
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT to_regclass('s') IS NULL OR $worker = ANY (pg_blocking_pids($dropper_pid))}),
	'plan: DROP TABLE s CASCADE waits for the worker, or is done');
$holder->query_safe('COMMIT');
# (query, not query_safe: the DROP warns that t is in error)
is($dropper->query("SELECT 'dropped'"), 'dropped', 'plan: the DROP is done');
like($dropper->{stderr}, qr/WARNING:  delta view "public.t" is in error/,
	'plan: the DROP says t is in error');

is( $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'"),
	$worker, 'plan: the worker lives on');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error' AND last_error ~ '^the view''s query was dropped by DROP TABLE'
		FROM delta_join.view_catalog WHERE target = 't'::regclass}),
	'plan: t is in error, its query dropped with its source');
$node->safe_psql('postgres', 'UPDATE other SET v = v + 1 WHERE k = 1');
is($node->safe_psql('postgres', "SELECT delta_join.wait('o', '60s')"), 't',
	'plan: and applies the other view');
is($node->safe_psql('postgres', 'SELECT v FROM o WHERE k = 1'), '2', 'plan: o is fresh');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('t')");

# ---- a source dropped after the views were read, before the view's locks ----

# the views are applied in the order of their ids: a first view whose
# target is locked holds the worker while the second one's source goes
$node->safe_psql(
	'postgres', q{
	CREATE TABLE s2 (k int PRIMARY KEY, v int);
	INSERT INTO s2 SELECT g, g FROM generate_series(1, 10) g;
	SELECT delta_join.create_view('t2', 'SELECT k, v FROM s2');});
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'the views are fresh again');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK TABLE o IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres',
	'UPDATE other SET v = v + 1 WHERE k = 2; UPDATE s2 SET v = v + 1 WHERE k = 2');
ok( $node->poll_query_until(
		'postgres', "SELECT $holder_pid = ANY (pg_blocking_pids($worker))"),
	'locks: the worker waits for the target of o');
$dropper->query('DROP TABLE s2 CASCADE');
like($dropper->{stderr}, qr/WARNING:  delta view "public.t2" is in error/,
	'locks: the DROP says t2 is in error');
$holder->query_safe('COMMIT');
is($node->safe_psql('postgres', "SELECT delta_join.wait('o', '60s')"), 't',
	'locks: o is applied');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error' AND last_error ~ '^the view''s query was dropped by DROP TABLE'
		FROM delta_join.view_catalog WHERE target = 't2'::regclass}),
	'locks: t2 is in error, its query dropped with its source');
is( $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'"),
	$worker, 'locks: the worker lives on');

$holder->quit;
$dropper->quit;

# ---- the plans of dropped views are freed ----

# a dropped view's plan, with the rows its lookup caches hold, was kept for
# the worker's life (a Citus node makes and drops views as groups move)
$node->safe_psql('postgres', "SELECT delta_join.drop_view('t2')");
$node->safe_psql('postgres', 'UPDATE other SET v = v + 1 WHERE k = 3');
is($node->safe_psql('postgres', "SELECT delta_join.wait('o', '60s')"), 't',
	'plans: a batch after the drops');
my $offset = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($worker)");
$node->wait_for_log(qr/logging memory contexts of PID $worker\b.*?Grand total/s, $offset);
my $dump = substr(slurp_file($node->logfile), $offset);
is(scalar(() = $dump =~ /level: \d+; delta_join plan:/g),
	1, 'plans: the worker keeps the plan of o only');

ok(!$node->log_contains(qr/terminated by signal/), 'no process crashed');
$node->stop;

done_testing();
