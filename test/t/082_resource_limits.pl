# Limits of the server's resources, and what a view says when it meets one.
#
# Shared memory keeps the progress of at most delta_join.max_views views,
# over all databases.  The worker of a database frees the entries of the
# views it no longer finds, but a database dropped with its views has no
# worker left to do so: its entries were kept until the server restarted,
# and after a few DROP DATABASE the server refused every new view, "too
# many delta views", though far fewer than max_views existed.  An entry of
# a database that no longer exists is free.
#
# The launcher, terminated (pg_terminate_backend, or SIGTERM from the
# shell), ended as a background worker that has finished: the postmaster
# forgot it, and no apply worker that stopped was ever started again
# until the server restarted -- every view of a database whose worker then
# died stayed stalled.  It is restarted like any worker that died.
#
# The worker of a database drops its slot once the last view is gone.  A
# database that got no worker (max_worker_processes) kept its slot after
# its last view was dropped, and with it the WAL from then on, with no view
# left to say so: drop_view drops it then (not when the same transaction
# makes a view again).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('resource_limits',
	conf => { 'delta_join.max_views' => 3 },
	extension => 0);

# A database with $n views (as many as it could create), applied.
sub database_with_views
{
	my ($db, $n) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql(
		$db, q{
		CREATE EXTENSION delta_join;
		CREATE TABLE acct (id bigint PRIMARY KEY, v text);
		INSERT INTO acct VALUES (1, 'one');});
	foreach my $i (1 .. $n)
	{
		my ($ret, $out, $err) = $node->psql($db,
			"SELECT delta_join.create_view('acct_copy$i', 'SELECT id, v FROM acct')");
		is($ret, 0, "$db: view $i is created") or diag($err);
	}
	$node->safe_psql($db, "INSERT INTO acct VALUES (2, 'two')");
	is($node->safe_psql($db, "SELECT delta_join.wait(NULL, '30s')"),
		't', "$db: its views are applied");
}

# ---- the entries of a dropped database are free again ----

database_with_views('first', 3);
my ($ret, $out, $err) = $node->psql('first',
	"SELECT delta_join.create_view('one_too_many', 'SELECT id, v FROM acct')");
like($err, qr/too many delta views: shared memory has room for 3/,
	'a view beyond delta_join.max_views is refused');

$node->safe_psql('postgres', 'DROP DATABASE first WITH (FORCE)');
database_with_views('second', 3);
is( $node->safe_psql(
		'second', "SELECT string_agg(state, ',') FROM delta_join.status"),
	'active,active,active',
	'after DROP DATABASE of a database with views, their places serve new views');

# ---- the launcher, terminated, comes back ----

# (no database connection: not in pg_stat_activity; a child of the postmaster)
sub launcher_pid
{
	my ($pid) = grep { /delta_join launcher/ } split /\n/,
	  `ps -o pid=,args= --ppid $node->{_pid}`;
	return defined $pid ? ($pid =~ /^\s*(\d+)/)[0] : undef;
}

my $launcher = launcher_pid();
ok(defined $launcher, 'the launcher runs');
kill 'TERM', $launcher;
for (my $i = 0; kill(0, $launcher) && $i < 300; $i++)
{
	select(undef, undef, undef, 0.1);
}
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	  . " WHERE backend_type = 'delta_join worker' AND datname = 'second'");
$node->safe_psql('second', "INSERT INTO acct VALUES (3, 'three')");
is( $node->safe_psql(
		'second', q{
		SELECT delta_join.wait(NULL, '60s');
		SELECT string_agg(v, ',' ORDER BY id) FROM acct_copy3}),
	"t\none,two,three",
	'after the launcher was terminated, the worker is started again and catches up');

$node->stop;

# ---- the slot of a database without a worker goes with its last view ----

# the launcher, core's logical replication launcher, and one apply worker
my $few = DeltaJoinTest::new_node('few_workers',
	conf => { max_worker_processes => 3 },
	extension => 0);
$node = $few;
database_with_views('served', 1);
$node->safe_psql('postgres', 'CREATE DATABASE unserved');
$node->safe_psql(
	'unserved', q{
	CREATE EXTENSION delta_join;
	CREATE TABLE acct (id bigint PRIMARY KEY, v text);
	INSERT INTO acct VALUES (1, 'one');});
$node->safe_psql('unserved',
	"SELECT delta_join.create_view('acct_copy', 'SELECT id, v FROM acct')");
$node->safe_psql('unserved', "INSERT INTO acct VALUES (2, 'two')");
like($node->safe_psql('unserved', 'SELECT state || \': \' || reason FROM delta_join.status'),
	qr/^stalled: no apply worker runs/, 'a database that gets no worker says so');
my $slot = 'delta_join_'
  . $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'unserved'");
$node->safe_psql('unserved', "SELECT delta_join.drop_view('acct_copy')");
ok( $node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = '$slot')"),
	'its slot is dropped with its last view');

# dropped in a transaction that rolls back, the view keeps its slot
$node->safe_psql('unserved',
	"SELECT delta_join.create_view('acct_copy', 'SELECT id, v FROM acct')");
$node->safe_psql('unserved',
	"BEGIN; SELECT delta_join.drop_view('acct_copy'); ROLLBACK;");
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'"),
	'1', 'a drop rolled back keeps the slot');
is($node->safe_psql('unserved', 'SELECT state FROM delta_join.status'),
	'stalled', '... and the view waits for a worker');

# the last view dropped and another made in the same transaction: the new
# view needs the slot, which must stay (dropped at commit, the view would
# have none, and the changes until one was made again would be lost)
$node->safe_psql(
	'unserved', q{
	BEGIN;
	SELECT delta_join.drop_view('acct_copy');
	SELECT delta_join.create_view('acct_copy2', 'SELECT id, v FROM acct');
	COMMIT;});
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'"),
	'1', 'a view made after the last one was dropped, in one transaction, keeps the slot');

$node->stop;
done_testing();
