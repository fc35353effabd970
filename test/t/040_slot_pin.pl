# No ordinary role pins a replication slot (issue 18, item 9).  A
# database's slot exists while it has views: it retains WAL, and a database
# with a slot cannot be dropped.  In 0.1 any role could call the internal
# _prepare_node() and make the slot, with an apply worker and no view, kept
# until the server restarted.  Here an ordinary role, logged in as itself,
# calls every internal function that could make or keep a slot, and makes
# views that fail: no slot stays, no worker runs, and the database can be
# dropped.  What the status views call stays callable, and tells the role
# nothing they would not: a view's retry reason (it quotes an error) only to
# the roles that can act as its target's owner.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('pin', extension => 0);
$node->safe_psql(
	'postgres', q{
	CREATE ROLE eve LOGIN;
	CREATE ROLE alice LOGIN;
	CREATE DATABASE pin;
	GRANT CREATE ON DATABASE pin TO alice;});
$node->safe_psql(
	'pin', q{
	CREATE EXTENSION delta_join;
	CREATE SCHEMA app AUTHORIZATION alice;
	CREATE TABLE secret (id int PRIMARY KEY, v text);
	GRANT CREATE ON SCHEMA public TO eve;});

# run SQL logged in as a role; returns (exit code, stdout, stderr)
sub as_role
{
	my ($role, $sql) = @_;
	my ($stdout, $stderr);
	my $rc = $node->psql(
		'pin', "\\set VERBOSITY verbose\n$sql",
		stdout => \$stdout,
		stderr => \$stderr,
		extra_params => [ '-U', $role ]);
	return ($rc, $stdout, $stderr);
}

# the slot and workers of database pin, as "slots/workers"
sub slot_and_workers
{
	return $node->safe_psql(
		'postgres', q{
		SELECT (SELECT count(*) FROM pg_replication_slots WHERE database = 'pin') || '/' ||
		       (SELECT count(*) FROM pg_stat_activity
		        WHERE datname = 'pin' AND backend_type = 'delta_join worker')});
}

# ---- the internal functions ----

foreach my $function ('_prepare_node()', '_sync_node()', '_wait_node(NULL, 1000)')
{
	my ($rc, $out, $err) = as_role('eve', "SELECT delta_join.$function");
	like($err, qr/ERROR:  42501: permission denied for function/,
		"an ordinary role may not call $function");
}
# (a worker started for a slot made by mistake would show within a second)
$node->safe_psql('pin', 'SELECT pg_sleep(1.5)');
is(slot_and_workers(), '0/0', 'no slot was made and no worker started');

# ---- views that fail ----

# create_view and refresh make the slot before anything else (so that no
# change committed after them is missed); when they fail, the worker finds
# no view and drops it
my ($rc, $out, $err) =
  as_role('eve', "SELECT delta_join.create_view('mine', 'SELECT id, v FROM secret')");
like($err, qr/ERROR:  42501: permission denied for table secret/,
	'a view over a table the role cannot read is refused');
($rc, $out, $err) = as_role('eve', "SELECT delta_join.refresh('nothing')");
like($err, qr/ERROR:  /, 'refresh of no view is refused');
ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_replication_slots WHERE database = 'pin'}),
	'no slot is left');
ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_stat_activity
		WHERE datname = 'pin' AND backend_type = 'delta_join worker'}),
	'and no worker');

# ---- a view's retry reason, read by another role ----

($rc, $out, $err) = as_role(
	'alice', q{
	CREATE TABLE app.src (id int PRIMARY KEY, v text);
	INSERT INTO app.src VALUES (1, 'one');
	SELECT delta_join.create_view('app.copy', 'SELECT id, v FROM app.src');});
is($rc, 0, 'an ordinary role makes a view over its own table') or diag $err;
ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE datname = 'pin' AND backend_type = 'delta_join worker'}),
	'the view has its worker');
is(slot_and_workers(), '1/1', 'and its slot');

# the view's changes wait while its target is locked: its status says why
my $locker = $node->background_psql('pin');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE app.copy IN ACCESS EXCLUSIVE MODE');
as_role('alice', "INSERT INTO app.src VALUES (2, 'two')");
ok( $node->poll_query_until(
		'pin', q{SELECT retry_reason IS NOT NULL FROM delta_join._stat()}),
	'the view waits for another try');
($rc, $out, $err) = as_role('alice', q{
	SELECT s.retry_reason ~ '^retrying' FROM delta_join._stat() s
	JOIN delta_join.view_catalog c USING (view_id) WHERE c.target = 'app.copy'::regclass});
is($out, 't', "its owner reads the reason from _stat()");
($rc, $out, $err) = as_role('eve', q{
	SELECT count(*) || ' ' || count(retry_reason) FROM delta_join._stat()});
is($out, '1 0', 'another role calling _stat() sees its counters, not its reason');
($rc, $out, $err) = as_role('eve', q{
	SELECT state || ' ' || coalesce(reason, '(none)') FROM delta_join.status});
is($out, 'active (none)', 'nor in delta_join.status');
$locker->query_safe('COMMIT');
$locker->quit;
($rc, $out, $err) = as_role('alice', "SELECT delta_join.wait('app.copy', '60s')");
is($out, 't', 'once the lock goes, the view catches up');

# ---- the last view dropped, the database can go ----

as_role('alice', "SELECT delta_join.drop_view('app.copy')");
ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_replication_slots WHERE database = 'pin'}),
	'dropping the last view drops the slot');
$node->safe_psql('postgres', 'DROP DATABASE pin');
pass('and the database can be dropped');

$node->stop;
done_testing();
