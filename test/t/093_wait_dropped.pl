# delta_join.wait() while a view it waits for is dropped.
#
# wait() reads the views, then waits for each to have applied what was
# committed before the call.  A view dropped meanwhile never gets there:
# the worker forgets a dropped view's progress, and with the database's
# last view drops the slot.  wait() waited for such a view until its
# timeout (for ever without one), and when the slot had gone with the last
# view it returned false, as for views that missed changes.  A dropped
# view has nothing left to wait for: wait() returns true once the others
# are fresh.
#
# Made with a lock: a session holds the target of the view in SHARE mode
# (the worker, which writes it, tries again later), its source changes,
# wait() starts, and the same session drops the view and commits.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('wait_dropped');
$node->safe_psql(
	'postgres', q{
	CREATE TABLE s1 (k int PRIMARY KEY, v int);
	CREATE TABLE s2 (k int PRIMARY KEY, v int);
	INSERT INTO s1 SELECT g, g FROM generate_series(1, 10) g;
	INSERT INTO s2 SELECT g, g FROM generate_series(1, 10) g;
	SELECT delta_join.create_view('w1', 'SELECT k, v FROM s1');
	SELECT delta_join.create_view('w2', 'SELECT k, v FROM s2');});
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'the views are fresh');

my $holder = $node->background_psql('postgres');
my $holder_pid = $holder->query_safe('SELECT pg_backend_pid()');

# wait() for every view, with a timeout, in a client of its own: returns
# its answer and the seconds it took
sub wait_while_dropped
{
	my ($view, $source) = @_;
	my ($out, $err) = ('', '');

	$holder->query_safe('BEGIN');
	$holder->query_safe("LOCK TABLE $view IN SHARE MODE");
	$node->safe_psql('postgres', "UPDATE $source SET v = v + 1 WHERE k = 1");
	my $t0 = time();
	my $waiter = IPC::Run::start(
		[
			'psql', '-XAtq', '-d', $node->connstr('postgres'),
			'-c', "SELECT delta_join.wait(NULL, '120s')"
		],
		'>', \$out, '2>', \$err);
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity
		  WHERE query LIKE 'SELECT delta_join.wait(NULL%' AND state = 'active'})
	  or die 'wait() did not start';
	# let it look once at the views, the dropped one still pending
	sleep 1;
	$holder->query_safe("SELECT delta_join.drop_view('$view')");
	$holder->query_safe('COMMIT');
	$waiter->finish;
	chomp $out;
	diag($err) if $err ne '';
	return ($out, time() - $t0);
}

# -- another view remains
my ($answer, $seconds) = wait_while_dropped('w1', 's1');
is($answer, 't', 'w1 dropped while wait() waits for it, w2 remains: wait() returns true');
cmp_ok($seconds, '<', 60, "... without waiting for its timeout ($seconds s)");

# -- the database's last view: its slot goes with it
($answer, $seconds) = wait_while_dropped('w2', 's2');
is($answer, 't', 'the last view dropped while wait() waits for it: wait() returns true');
cmp_ok($seconds, '<', 60, "... without waiting for its timeout ($seconds s)");
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name LIKE 'delta_join%'}),
	'the slot went with the last view');

# a view created again is waited for as before
$node->safe_psql('postgres', "SELECT delta_join.create_view('w3', 'SELECT k, v FROM s1')");
$node->safe_psql('postgres', 'UPDATE s1 SET v = v + 1 WHERE k = 2');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'a new view: wait() returns true');
is($node->safe_psql('postgres', 'SELECT count(*) FROM (TABLE w3 EXCEPT TABLE s1) d'),
	'0', 'and it is fresh');

$holder->quit;
$node->stop;
done_testing();
