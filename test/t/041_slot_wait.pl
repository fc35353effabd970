# The first view of a database, and a refresh that recreates a lost slot,
# make the database's replication slot, which waits until every transaction
# that has written, in any database, has ended (issue 18, item 12).  A
# prepared transaction ends only when someone commits or rolls it back:
# the wait is said once, as a WARNING naming the transaction and what ends
# it; the timeout that may end the wait says what it was waiting for;
# delta_join._database_wait() and delta_join.status show it meanwhile; no
# worker is started for the slot being made (it failed, every second or
# two, to take the slot, and logged it); and once the prepared transaction
# is committed the view is made and maintained.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('slot_wait', conf => { max_prepared_transactions => '2' });
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE TABLE t (x int)');
$node->safe_psql('postgres',
	"CREATE TABLE acct (id bigint PRIMARY KEY, v text); INSERT INTO acct VALUES (1, 'one')");
my $dboid = $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'postgres'");
my $slot = "delta_join_$dboid";
my $create = "SELECT delta_join.create_view('acct_copy', 'SELECT id, v FROM acct')";

sub slot_count
{
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'");
}

# ---- the first view, while a transaction of another database is prepared ----

$node->safe_psql('other', "BEGIN; INSERT INTO t VALUES (1); PREPARE TRANSACTION 'stuck';");
my $log_offset = -s $node->logfile;

my ($rc, $out, $err) = $node->psql('postgres', "SET statement_timeout = '3s'; $create");
like(
	$err,
	qr/WARNING:  the replication slot of this database waits for prepared transaction "stuck" to end
DETAIL:  Creating the slot waits for every transaction that has written, in any database, to end; a prepared transaction ends only when it is committed or rolled back.  "stuck" is in database "other".
HINT:  Run COMMIT PREPARED 'stuck' or ROLLBACK PREPARED 'stuck' in database "other", or cancel this statement and create the view later./,
	'create_view says which prepared transaction it waits for, and what ends the wait');
is(scalar(() = $err =~ /WARNING/g), 1, 'once');
like(
	$err,
	qr/ERROR:  canceling statement due to statement timeout
CONTEXT:  creating replication slot "$slot", which waits for prepared transaction "stuck" to end/,
	'the statement timeout says what the statement was waiting for');
is(slot_count(), '0', 'the slot being made went with the failed statement');

# The same, without a timeout, from a session that waits: the database says
# why.  Meanwhile no worker may start for the slot (the launcher looks at
# the slots every second: leave it a few rounds).
my $creator = $node->background_psql('postgres');
$creator->query_until(qr/started/, "\\echo started\n$create;\n");
ok( $node->poll_query_until(
		'postgres', q{
		SELECT delta_join._database_wait() ~
		  '^the replication slot of this database is being created and waits for prepared transaction "stuck" \(database "other"\) to end: COMMIT PREPARED or ROLLBACK PREPARED it$'}
	),
	'delta_join._database_wait() says why the database waits');
$node->safe_psql('postgres', 'SELECT pg_sleep(3)');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'delta_join worker'"),
	'0', 'no worker started for the slot being made');

$node->safe_psql('other', "COMMIT PREPARED 'stuck'");
($out) = $creator->query("SELECT 'after'");
like($out, qr/acct_copy\nafter/, 'once the prepared transaction is committed, the view is made');
$creator->quit;

my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/ERROR:  replication slot "$slot" is active/,
	'no worker failed to take the slot meanwhile');
is(scalar(() = $log =~ /ERROR/g), 1, 'the log has one error: the statement timeout')
  or diag($log);
is(scalar(() = $log =~ /WARNING:  the replication slot of this database waits/g),
	2, 'and one warning per statement that waited');

$node->safe_psql('postgres', "INSERT INTO acct VALUES (2, 'two')");
is($node->safe_psql('postgres', "SELECT delta_join.wait('acct_copy', '60s')"),
	't', 'the view is maintained');
is($node->safe_psql('postgres', 'SELECT count(*) FROM acct_copy'), '2', 'with every row');

# ---- a refresh that recreates a lost slot: status says why it waits ----

# Lose the slot (as t/013_slot_lost.pl): keep the worker out, drop the slot.
$node->safe_psql('postgres', 'CREATE DATABASE admin');
$node->safe_psql('admin', 'ALTER DATABASE postgres ALLOW_CONNECTIONS false');
$node->safe_psql('admin',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'delta_join worker'");
ok( $node->poll_query_until(
		'admin',
		"SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$slot' AND active"),
	'the worker let go of the slot');
$node->safe_psql('admin', "SELECT pg_drop_replication_slot('$slot')");
$node->safe_psql('admin', 'ALTER DATABASE postgres ALLOW_CONNECTIONS true');

$node->safe_psql('other', "BEGIN; INSERT INTO t VALUES (2); PREPARE TRANSACTION 'stuck again';");
my $refresher = $node->background_psql('postgres');
$refresher->query_until(qr/started/, "\\echo started\nSELECT delta_join.refresh('acct_copy');\n");
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'stalled'
		   AND reason ~ 'is being created and waits for prepared transaction "stuck again"'
		FROM delta_join.status WHERE target = 'public.acct_copy'}),
	'delta_join.status says the view waits for the slot, and for which prepared transaction');
$node->safe_psql('other', "ROLLBACK PREPARED 'stuck again'");
($out) = $refresher->query("SELECT 'after'");
like($out, qr/^2\nafter/, 'once it is rolled back, the refresh is done');
$refresher->quit;
$node->safe_psql('postgres', "INSERT INTO acct VALUES (3, 'three')");
is($node->safe_psql('postgres', "SELECT delta_join.wait('acct_copy', '60s')"),
	't', 'and the view is maintained');
is( $node->safe_psql('postgres',
		"SELECT state || ' ' || (SELECT count(*) FROM acct_copy) FROM delta_join.status"),
	'active 3', 'active, with every row');

$node->stop;
done_testing();
