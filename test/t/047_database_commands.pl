# DROP DATABASE, and other commands on a database, with views.
#
# Core refuses to drop a database while a replication slot of it exists,
# and while any process, the apply worker included, is connected to it: a
# database with views could not be dropped until its views were dropped and
# the worker had noticed, and DROP DATABASE ... WITH (FORCE) did not help.
# The library now stops the worker and drops the slot first, but only when
# the command can then go through: the database's owner runs it, outside a
# transaction block, and no other session uses the database (or FORCE
# terminates them).  Otherwise core's own error says what stops it, and the
# views go on.  That includes what stops FORCE itself -- a prepared
# transaction of the database, a session FORCE may not terminate --, which
# once came after the slot had been dropped: the command failed, and the
# views had lost their slot.  CREATE DATABASE ... TEMPLATE, ALTER
# DATABASE ... RENAME and SET TABLESPACE of such a database, which core
# also refuses while the worker is connected, go through the same way,
# the slot kept.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('drop_database',
	conf => { max_prepared_transactions => 2 });
$node->safe_psql('postgres', 'CREATE ROLE other LOGIN');

# A database with a view, applied; returns its slot's name.
sub database_with_view
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql(
		$db, q{
		CREATE EXTENSION delta_join;
		CREATE TABLE acct (id bigint PRIMARY KEY, v text);
		INSERT INTO acct VALUES (1, 'one');
		SELECT delta_join.create_view('acct_copy', 'SELECT id, v FROM acct');});
	$node->safe_psql($db, "INSERT INTO acct VALUES (2, 'two')");
	is($node->safe_psql($db, "SELECT delta_join.wait('acct_copy', '30s')"),
		't', "$db: the view is applied");
	my $oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = '$db'");
	return "delta_join_$oid";
}

sub slot_exists
{
	my ($slot) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'") eq '1';
}

# The views of $db are still maintained.
sub views_go_on
{
	my ($db, $name) = @_;
	$node->safe_psql($db, "UPDATE acct SET v = v || '+'");
	# (two statements: the second's snapshot is taken after the wait)
	is( $node->safe_psql(
			$db, q{
			SELECT delta_join.wait('acct_copy', '30s');
			SELECT string_agg(v, ',' ORDER BY id) FROM acct_copy}),
		"t\none+,two+", "$name: the views go on");
}

# ---- the database's owner, nobody else connected ----

my $slot = database_with_view('one');
my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE one');
is($ret, 0, 'DROP DATABASE of a database with views goes through') or diag($err);
ok(!slot_exists($slot), '... and its slot is gone');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'one'"),
	'0', '... and the database');

# ---- what stops the command stops us too ----

$slot = database_with_view('two');

# inside a transaction block
($ret, $out, $err) = $node->psql('postgres', 'BEGIN; DROP DATABASE two; COMMIT');
like($err, qr/DROP DATABASE cannot run inside a transaction block/,
	'in a transaction block: core refuses');
ok(slot_exists($slot), '... and the slot is kept');

# by a role that does not own the database
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE two', extra_params => [ '-U', 'other' ]);
like($err, qr/must be owner of database two/, 'by another role: core refuses');
ok(slot_exists($slot), '... and the slot is kept');

# while another session uses the database
my $session = $node->background_psql('two');
$session->query_safe('SELECT 1');
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE two');
like($err, qr/database "two" is being accessed by other users/,
	'with another session connected: core refuses');
ok(slot_exists($slot), '... and the slot is kept');
views_go_on('two', 'after the refused drops');

# FORCE terminates that session: the slot goes, then the database
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE two WITH (FORCE)');
is($ret, 0, 'DROP DATABASE ... WITH (FORCE) with another session connected goes through')
  or diag($err);
ok(!slot_exists($slot), '... and the slot is gone');
eval { $session->quit };

# ---- what stops FORCE stops us too ----

# a prepared transaction of the database: FORCE cannot end it
$slot = database_with_view('three');
$node->safe_psql('three', q{
	CREATE TABLE scratch (i int);
	BEGIN; INSERT INTO scratch VALUES (1); PREPARE TRANSACTION 'in_three';});
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE three WITH (FORCE)');
like($err, qr/database "three" is being used by prepared transactions/,
	'FORCE with a prepared transaction: core refuses');
ok(slot_exists($slot), '... and the slot is kept');
$node->safe_psql('three', "ROLLBACK PREPARED 'in_three'");
views_go_on('three', 'after FORCE was refused for a prepared transaction');

# a superuser's session, which the database's owner, no superuser, may not
# terminate
$node->safe_psql('postgres', 'ALTER DATABASE three OWNER TO other');
$session = $node->background_psql('three');
$session->query_safe('SELECT 1');
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE three WITH (FORCE)',
	extra_params => [ '-U', 'other' ]);
like($err, qr/terminate/,
	'FORCE by the owner with a superuser connected: core refuses to terminate it');
ok(slot_exists($slot), '... and the slot is kept');
$node->safe_psql('three', "UPDATE acct SET v = rtrim(v, '+')");
views_go_on('three', 'after FORCE was refused for a session');
$session->quit;

# a backend outlives its client's exit for a moment: the superuser sessions
# (that one, and views_go_on's) must be gone, or FORCE meets them again
$node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM pg_stat_activity
	WHERE datname = 'three' AND backend_type = 'client backend'})
  or die 'the sessions of three did not end';
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE three WITH (FORCE)',
	extra_params => [ '-U', 'other' ]);
is($ret, 0, 'FORCE by the owner, no superuser, once alone: goes through') or diag($err);
ok(!slot_exists($slot), '... and the slot is gone');

# ---- no worker is left trying to start for a dropped database ----

my $log_offset = -s $node->logfile;
sleep 3;
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/delta_join worker for database \d+/,
	'no worker started for the dropped databases since');

# ---- CREATE DATABASE ... TEMPLATE, ALTER DATABASE ... RENAME ----

# Core refuses both while any process is connected to the database, the
# apply worker included: the worker steps aside for the database's owner
# (the launcher starts it again once the command is done), and the views
# keep their slot.
$slot = database_with_view('four');
($ret, $out, $err) = $node->psql('postgres', 'CREATE DATABASE four_copy TEMPLATE four');
is($ret, 0, 'CREATE DATABASE ... TEMPLATE a database with views goes through') or diag($err);
ok(slot_exists($slot), '... and the slot is kept');
views_go_on('four', 'after the copy');
# the copy has the views' catalog but no slot: it says so, refresh() starts them
like( $node->safe_psql('four_copy', q{SELECT state || ': ' || reason FROM delta_join.status}),
	qr/^stalled: the replication slot of this database is missing/,
	'the copy says its view has no slot');
$node->safe_psql('four_copy', "SELECT delta_join.refresh('acct_copy')");
views_go_on('four_copy', 'the copy, once refreshed');

($ret, $out, $err) = $node->psql('postgres', 'ALTER DATABASE four RENAME TO five');
is($ret, 0, 'ALTER DATABASE ... RENAME of a database with views goes through') or diag($err);
ok(slot_exists($slot), '... and the slot is kept');
$node->safe_psql('five', "UPDATE acct SET v = rtrim(v, '+')");
views_go_on('five', 'after the rename');

my $tablespace = $node->basedir . '/elsewhere';
mkdir $tablespace or die "mkdir $tablespace: $!";
$node->safe_psql('postgres', "CREATE TABLESPACE elsewhere LOCATION '$tablespace'");
($ret, $out, $err) = $node->psql('postgres', 'ALTER DATABASE five SET TABLESPACE elsewhere');
is($ret, 0, 'ALTER DATABASE ... SET TABLESPACE of a database with views goes through')
  or diag($err);
ok(slot_exists($slot), '... and the slot is kept');
$node->safe_psql('five', "UPDATE acct SET v = rtrim(v, '+')");
views_go_on('five', 'after the move');

# another role cannot make the worker step aside
my $worker_of_five = q{
	SELECT pid FROM pg_stat_activity
	WHERE backend_type = 'delta_join worker' AND datname = 'five'};
my $pid = $node->safe_psql('postgres', $worker_of_five);
($ret, $out, $err) = $node->psql('postgres', 'ALTER DATABASE five RENAME TO six',
	extra_params => [ '-U', 'other' ]);
like($err, qr/must be owner of database five/, 'a rename by another role: core refuses');
is($node->safe_psql('postgres', $worker_of_five), $pid, '... and the worker was left alone');

# the other databases' views are not disturbed
$node->safe_psql('postgres', q{
	CREATE TABLE acct (id bigint PRIMARY KEY, v text);
	INSERT INTO acct VALUES (1, 'one'), (2, 'two');
	SELECT delta_join.create_view('acct_copy', 'SELECT id, v FROM acct');});
views_go_on('postgres', 'a view of another database, made after the drops');

$node->stop;
done_testing();
