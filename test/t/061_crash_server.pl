# Immediate shutdown of the server in the middle of a stream of writes
# (DESIGN.md §6.2).
#
# A join view and an aggregate view (whose source also sees deletes) are
# maintained while pgbench streams seeded random writes; the server is
# stopped with mode immediate (no shutdown checkpoint, like a power cut)
# mid-stream, and started again, three times.  After each restart:
#  - delta_join.wait() returns true and every target equals its query
#    (EXCEPT ALL both ways): no change was lost and none was applied twice
#    in a way that shows;
#  - every view is active with no error, the database's slot still exists,
#    and after further writes it moves past them (the worker confirms what
#    it applied, so WAL is not retained for nothing).
#
# "No batch half applied": a batch commits its target writes together with
# the view's applied LSN, so after recovery either all of it is visible or
# none of it is and it is replayed.  From outside, what can be checked is
# that the recovered state converges exactly, which these checks do after
# each of several crashes that land at different points of the stream.
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

my $seed = 6161;

my $node = DeltaJoinTest::new_node('main',
	conf => { %DeltaJoinTest::parallel_apply });

my %views = (
	order_item_wide => q{SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount, o.note
  FROM orders AS o
  JOIN items AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id},
	account_summary => q{SELECT account, count(*) AS entries, sum(amount) AS balance,
    min(amount) AS smallest, string_agg(entry::text, ',' ORDER BY entry) AS entry_list
  FROM ledger GROUP BY account});

DeltaJoinTest::worked_example($node, note => 1, rows => 0);
$node->safe_psql(
	'postgres', q{
	CREATE TABLE ledger (
	  account int, entry int, amount numeric(12,2),
	  PRIMARY KEY (account, entry));
	INSERT INTO items SELECT m, i, 'item ' || i
	  FROM generate_series(1, 10) m, generate_series(1, 40) i;
	INSERT INTO orders SELECT m, i, 1, i, NULL
	  FROM generate_series(1, 10) m, generate_series(1, 50) i;
	INSERT INTO ledger SELECT a, e, e
	  FROM generate_series(1, 20) a, generate_series(1, 10) e;});
foreach my $t (sort keys %views)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$t', \$q\$ $views{$t} \$q\$)");
}
my $slot = 'delta_join_'
  . $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'postgres'");

my $pick = q{\set m random(1, 10)
\set i random(1, 50)
\set o random(1, 20)
\set a random(1, 1000000)
\set n random(0, 9)
\set acc random(1, 25)
\set e random(1, 30)
};
my $scripts = DeltaJoinWorkload::write_scripts(
	upsert_order => [
		4, $pick . q{INSERT INTO orders VALUES (:m, :i, :o, :a / 100.0,
    CASE WHEN :n < 3 THEN NULL ELSE 'n' || :a END)
  ON CONFLICT (merchant_id, item_id, order_id)
  DO UPDATE SET amount = excluded.amount, note = excluded.note;
}
	],
	update_items => [
		2, $pick . q{BEGIN;
INSERT INTO items VALUES (:m, :i, 'item ' || :i || ' v' || :a)
  ON CONFLICT (merchant_id, item_id) DO UPDATE SET item_name = excluded.item_name;
UPDATE orders SET amount = amount + 1 WHERE merchant_id = :m AND item_id = :i;
COMMIT;
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

sub check_views
{
	my ($name) = @_;
	DeltaJoinWorkload::check_views($node, \%views, $name);
	is( $node->safe_psql(
			'postgres',
			"SELECT string_agg(state || ':' || (last_error IS NULL), ',') FROM delta_join.status"
		),
		'active:true,active:true',
		"$name: every view is active, with no error");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'"),
		'1',
		"$name: slot $slot exists");
}

for my $round (1 .. 3)
{
	my $stream = DeltaJoinWorkload::pgbench_start(
		$node, $scripts,
		seed => $seed + $round,
		clients => 3,
		seconds => 5);
	usleep(700_000 + 400_000 * $round);
	$node->stop('immediate');
	my $res = DeltaJoinWorkload::pgbench_finish($stream);
	note("round $round: the stream ran $res->{processed} transactions before the stop");
	$node->start;
	check_views("after immediate shutdown $round");
}

# ---- maintenance goes on, and the slot moves past new writes ----

my $before = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
DeltaJoinWorkload::pgbench_ok($node, $scripts, 'after the restarts',
	seed => $seed + 10,
	clients => 3,
	transactions => 300);
check_views('writes after the restarts');
foreach my $t (sort keys %views)
{
	DeltaJoinWorkload::status_ok($node, $t, 'after the restarts');
}
ok( DeltaJoinWorkload::poll_until(
		$node,
		"SELECT confirmed_flush_lsn > '$before' FROM pg_replication_slots WHERE slot_name = '$slot'",
		20),
	'the slot confirms positions past the writes made after the restarts');

# parallel apply took part: helpers are started only for a batch to share
like(slurp_file($node->logfile), qr/delta_join helper \d+ for database \d+ started/,
	'helpers were started to apply shares');

$node->stop;
done_testing();
