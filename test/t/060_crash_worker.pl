# Crash of the apply worker in the middle of a stream of writes
# (DESIGN.md §6.2).
#
# Three views in one database: the §1 join order_item_wide over orders and
# items, merchant_summary (an aggregate over the same orders) and
# ledger_summary (an aggregate over ledger, whose rows are also deleted).
# pgbench streams seeded random writes (no deletes on the join's sources,
# so the join target must equal its query exactly) while the apply worker
# is killed:
#
#  1. with SIGTERM (pg_terminate_backend), several times, while the stream
#     goes on: the launcher starts a new worker, which resumes from the
#     slot's confirmed position;
#  2. with SIGKILL, several times: the postmaster then restarts every
#     process (crash recovery), the stream's connections are cut, and a new
#     stream is started after each restart.
#
# After each part, when the stream has ended, delta_join.wait() returns true
# and every target equals its query (EXCEPT ALL both ways), every view is
# active and a worker runs again.
#
# The server applies with parallel apply (DeltaJoinTest::parallel_apply):
# every batch of the views that can be shared is split between the worker
# and two helpers.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use DeltaJoinTest;
use DeltaJoinWorkload;

my $seed = 6060;

# a killed backend must restart the server (PostgreSQL::Test::Cluster turns
# restart_after_crash off)
my $node = DeltaJoinTest::new_node('main',
	conf => { restart_after_crash => 'on', %DeltaJoinTest::parallel_apply });

my %views = (
	order_item_wide => q{SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
  FROM orders AS o
  JOIN items AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id},
	merchant_summary => q{SELECT merchant_id, count(*) AS order_count, sum(amount) AS total_amount,
    max(amount) AS max_amount
  FROM orders GROUP BY merchant_id},
	ledger_summary => q{SELECT account, count(*) AS entries, sum(amount) AS balance,
    string_agg(entry::text, ',' ORDER BY entry) AS entry_list
  FROM ledger GROUP BY account});

DeltaJoinTest::worked_example($node, rows => 0);
$node->safe_psql(
	'postgres', q{
	SELECT setseed(0.6060);
	CREATE TABLE ledger (
	  account int, entry int, amount numeric(12,2),
	  PRIMARY KEY (account, entry));
	INSERT INTO items SELECT m, i, 'item ' || i
	  FROM generate_series(1, 10) m, generate_series(1, 40) i;
	INSERT INTO orders SELECT m, i, 1, round((random() * 100)::numeric, 2)
	  FROM generate_series(1, 10) m, generate_series(1, 50) i;
	INSERT INTO ledger SELECT a, e, e
	  FROM generate_series(1, 20) a, generate_series(1, 10) e;});
foreach my $t (sort keys %views)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$t', \$q\$ $views{$t} \$q\$)");
}

my $pick = q{\set m random(1, 10)
\set i random(1, 50)
\set o random(1, 20)
\set a random(1, 1000000)
\set acc random(1, 25)
\set e random(1, 30)
};
my $scripts = DeltaJoinWorkload::write_scripts(
	upsert_order => [
		4, $pick . q{INSERT INTO orders VALUES (:m, :i, :o, :a / 100.0)
  ON CONFLICT (merchant_id, item_id, order_id) DO UPDATE SET amount = excluded.amount;
}
	],
	update_item => [
		2, $pick . q{INSERT INTO items VALUES (:m, :i, 'item ' || :i || ' v' || :a)
  ON CONFLICT (merchant_id, item_id) DO UPDATE SET item_name = excluded.item_name;
}
	],
	ledger => [
		4, $pick . q{BEGIN;
INSERT INTO ledger VALUES (:acc, :e, :a / 100.0)
  ON CONFLICT (account, entry) DO UPDATE SET amount = excluded.amount;
\set e random(1, 30)
DELETE FROM ledger WHERE account = :acc AND entry = :e;
COMMIT;
}
	]);

# every target equals its query, every view is active
sub check_views
{
	my ($name) = @_;
	DeltaJoinWorkload::check_views($node, \%views, $name);
	DeltaJoinWorkload::status_ok($node, $_, $name) foreach sort keys %views;
}

# ---- 1. SIGTERM of the worker while the stream goes on ----

my $stream = DeltaJoinWorkload::pgbench_start(
	$node, $scripts,
	seed => $seed,
	clients => 3,
	seconds => 6);
my @killed;
for my $round (1 .. 3)
{
	usleep(1_200_000);
	my $pid = DeltaJoinWorkload::worker_pid($node, 20, \@killed);
	next unless defined $pid;
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
	push @killed, $pid;
}
my $res = DeltaJoinWorkload::pgbench_finish($stream);
is(scalar(@killed), 3, 'SIGTERM: the worker was found and terminated 3 times');
ok($res->{rc} == 0 && $res->{failed} == 0 && $res->{processed} > 0,
	"SIGTERM: the stream ran on ($res->{processed} transactions)")
  or diag("pgbench exit status $res->{rc}\n$res->{stdout}\n$res->{stderr}");
my $pid = DeltaJoinWorkload::worker_pid($node, 20, \@killed);
ok(defined $pid, 'SIGTERM: the launcher starts a new worker');
check_views('after SIGTERM of the worker');

# ---- 2. SIGKILL of the worker: crash and restart of the server ----

my $crashes = 0;
for my $round (1 .. 3)
{
	my $stream = DeltaJoinWorkload::pgbench_start(
		$node, $scripts,
		seed => $seed + $round,
		clients => 3,
		seconds => 5);
	usleep(1_000_000 + 300_000 * $round);
	my $pid = DeltaJoinWorkload::worker_pid($node);
	if (defined $pid)
	{
		kill 'KILL', $pid;
		$crashes++;
	}
	# the crash cuts the stream's connections; it ends on its own
	my $res = DeltaJoinWorkload::pgbench_finish($stream);
	note("round $round: the stream ran $res->{processed} transactions before the crash");
	DeltaJoinWorkload::poll_until($node, 'SELECT true', 30)
	  or BAIL_OUT('the server did not come back after the crash');
}
is($crashes, 3, 'SIGKILL: the worker was found and killed 3 times');
$node->log_check(
	'SIGKILL: the postmaster restarted the server',
	0,
	log_like => [qr/terminated by signal 9: Killed/, qr/all server processes terminated; reinitializing/]);
ok(defined DeltaJoinWorkload::worker_pid($node, 30),
	'SIGKILL: a worker runs again after the restart');
# counters start again with the server: a write after the last restart (the
# worker may have applied the whole stream before it was killed), so that
# "has seen changes" says the new worker applies
$node->safe_psql(
	'postgres', q{
	UPDATE orders SET amount = amount WHERE merchant_id = 1;
	UPDATE ledger SET amount = amount WHERE account = (SELECT min(account) FROM ledger);});
check_views('after SIGKILL of the worker');

# ---- writes after the crashes are still applied ----

DeltaJoinWorkload::pgbench_ok($node, $scripts, 'after the crashes',
	seed => $seed + 10,
	clients => 3,
	transactions => 300);
check_views('writes after the crashes');

my $slots = $node->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'delta\\_join\\_%'");
is($slots, '1', 'one delta_join slot in the end');

# parallel apply took part: helpers are started only for a batch to share
like(slurp_file($node->logfile), qr/delta_join helper \d+ for database \d+ started/,
	'helpers were started to apply shares');

$node->stop;
done_testing();
