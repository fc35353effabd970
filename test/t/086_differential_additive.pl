# Differential test of the additive apply of aggregates over joins (issue
# 22; src/apply/apply_additive.c).
#
# For each seed, in a schema of its own, three REPLICA IDENTITY FULL tables
#
#   merchants (id PK, region, tier)
#   items     (id PK, category)
#   orders    (id PK, merchant_id, item_id, qty int NOT NULL,
#              amount numeric(12,2), note int, big bigint, status)
#
# and views over orders JOIN merchants [JOIN items] that the analysis finds
# additive (explain says so), each exercising what adding must get right:
#
#  - add_region: count(*), sum of a NOT NULL int, count and sum of a
#    nullable int, sum of numeric(12,2) and of bigint (a numeric sum), by a
#    merchant column that is NULL at times;
#  - add_status_filtered: by an order column and a merchant column, with
#    filters on both sides that changes flip;
#  - add_three: the three tables, by a column of each looked-up table;
#  - add_no_count: a sum without count(*), so that a group rows left
#    cannot tell whether it emptied (recomputed);
#  - add_nullable_small: a sum of a nullable column and count(*), with a
#    small max_batch_size.
#
# Phase 1: concurrent pgbench clients write orders only (inserts, updates
# of every column, moves between merchants and items, to and from NULL,
# deletes of rows and of whole groups, multi-statement and rolled-back
# transactions): every batch changed one source, and is added.  Then two
# UPDATEs of most orders in one transaction larger than the worker's batch
# (max_batch_size 40): its keys spill to disk, and are read back a chunk
# at a time (never all in memory), the deltas of the chunks summed per
# group before they are added -- or, additive apply off, the groups each
# chunk leads to gathered, then recomputed.  Then a backlog of writes on
# orders, with much WAL of another table between them, read by a worker
# that was stopped: its batches are cut short, the views' keys held until
# a batch reaches the end of the WAL, which adds them all.  Phase 2:
# every source changes (merchants change region and tier, are deleted and
# recreated; items change category): batches that changed two sources are
# recomputed, the others added.  After each phase delta_join.wait() returns
# true and each target equals its query exactly (EXCEPT ALL both ways).
#
# The seeds switch delta_join.additive_aggregates on and off (off: the same
# views by keyed recompute, compared the same way) and set-based apply.
# With it on, the server log (log_min_messages = debug1) must show that
# batches were added, and that groups were recomputed when adding could not
# tell (add_no_count, nullable sums).
#
# Then exactly once: a refresh() while the worker is stopped fills the
# target with changes the worker decodes afterwards, and a refresh(
# concurrently) runs under a stream of writes; neither may count a change
# twice.  And a view registered with narrow keys (not additive when made)
# is made additive by refresh().

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my @seeds = (8601, 8602, 8603);
my $merchants = 25;
my $items = 12;
my $orders = 600;

my $node = DeltaJoinTest::new_node('main', conf => { log_min_messages => 'debug1' });

sub queries
{
	my ($s) = @_;
	return (
		"$s.add_region" => qq{SELECT m.region, count(*) AS n, sum(o.qty) AS qty,
    count(o.note) AS notes, sum(o.note) AS note_sum, sum(o.amount) AS total, sum(o.big) AS big
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id GROUP BY m.region},
		"$s.add_status_filtered" => qq{SELECT o.status, m.tier, count(*) AS n, sum(o.amount) AS total
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id
  WHERE m.tier <> 0 AND o.qty > 2 GROUP BY o.status, m.tier},
		"$s.add_three" => qq{SELECT m.region, i.category, count(*) AS n, sum(o.qty) AS qty
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id
    JOIN $s.items i ON i.id = o.item_id
  GROUP BY m.region, i.category},
		"$s.add_no_count" => qq{SELECT m.tier, sum(o.qty) AS qty
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id GROUP BY m.tier},
		"$s.add_nullable_small" => qq{SELECT i.category, count(*) AS n, sum(o.note) AS note_sum
  FROM $s.orders o JOIN $s.items i ON i.id = o.item_id GROUP BY i.category});
}

sub order_scripts
{
	my ($s) = @_;
	my $pick = qq{\\set m random(1, $merchants)
\\set i random(1, $items)
\\set o random(1, $orders)
\\set q random(1, 9)
\\set a random(-10000, 100000)
\\set n random(0, 9)
};
	my $status = q{CASE WHEN :n = 0 THEN NULL ELSE 's' || (:n % 3) END};
	my $note = q{CASE WHEN :n < 4 THEN NULL ELSE :n * 10 END};
	my $insert = qq{INSERT INTO $s.orders VALUES (:o,
    CASE WHEN :n = 9 THEN NULL ELSE :m END, CASE WHEN :n = 8 THEN NULL ELSE :i END,
    :q, :a / 100.0, $note, :a * 1000000000::bigint, $status)
  ON CONFLICT (id) DO UPDATE SET qty = excluded.qty, note = excluded.note;
};
	my $update = qq{UPDATE $s.orders SET amount = :a / 100.0, qty = :q, note = $note,
    big = CASE WHEN :n = 1 THEN NULL ELSE :a END, status = $status WHERE id = :o;
};
	my $move = qq{UPDATE $s.orders SET merchant_id = CASE WHEN :n = 9 THEN NULL ELSE :m END,
    item_id = CASE WHEN :n < 5 THEN :i ELSE item_id END WHERE id = :o;
};
	my $delete = qq{DELETE FROM $s.orders WHERE id = :o;
};
	return (
		insert_order => [ 6, $pick . $insert ],
		update_order => [ 5, $pick . $update ],
		move_order => [ 4, $pick . $move ],
		delete_order => [ 3, $pick . $delete ],
		delete_group => [
			1, $pick . qq{\\if :n = 0
DELETE FROM $s.orders WHERE merchant_id = :m;
\\endif
}
		],
		transaction => [
			2, $pick . qq{BEGIN;
$move$update\\set o random(1, $orders)
$insert$delete$update
COMMIT;
}
		],
		rolled_back => [
			1, $pick . qq{BEGIN;
DELETE FROM $s.orders WHERE merchant_id = :m;
$insert
ROLLBACK;
}
		]);
}

sub source_scripts
{
	my ($s) = @_;
	my $pick = qq{\\set m random(1, $merchants)
\\set i random(1, $items)
\\set n random(0, 9)
};
	my $region = q{CASE WHEN :n < 2 THEN NULL ELSE 'r' || (:n % 4) END};
	return (
		update_merchant => [
			3, $pick . qq{UPDATE $s.merchants SET region = $region, tier = :n % 3 WHERE id = :m;
}
		],
		recreate_merchant => [
			1, $pick . qq{BEGIN;
DELETE FROM $s.merchants WHERE id = :m;
INSERT INTO $s.merchants VALUES (:m, $region, :n % 2) ON CONFLICT DO NOTHING;
COMMIT;
}
		],
		update_item => [
			2, $pick . qq{UPDATE $s.items SET category = CASE WHEN :n = 0 THEN NULL ELSE 'c' || (:n % 3) END
  WHERE id = :i;
}
		]);
}

sub additive_apply
{
	my ($on) = @_;
	$node->safe_psql('postgres',
		'ALTER SYSTEM SET delta_join.additive_aggregates = '
		  . ($on ? 'on' : 'off')
		  . '; SELECT pg_reload_conf()');
	note('additive apply ' . ($on ? 'on' : 'off'));
}

my @run = DeltaJoinTest::seeds($node, @seeds);
foreach my $seed (@run)
{
	my $additive = $seed != $seeds[1];
	additive_apply($additive);
	DeltaJoinWorkload::set_based_apply($node, $seed == $seeds[2]);
	DeltaJoinWorkload::whole_recompute($node, 'never');
	my $s = "s$seed";
	my %views = queries($s);
	my @targets = sort keys %views;
	my $log_start = -s $node->logfile;

	$node->safe_psql(
		'postgres', qq{
		SELECT setseed(1.0 / $seed);
		CREATE SCHEMA $s;
		CREATE TABLE $s.merchants (id int PRIMARY KEY, region text, tier int);
		CREATE TABLE $s.items (id int PRIMARY KEY, category text);
		CREATE TABLE $s.orders (id int PRIMARY KEY, merchant_id int, item_id int,
		  qty int NOT NULL, amount numeric(12,2), note int, big bigint, status text);
		CREATE INDEX ON $s.orders (merchant_id);
		CREATE INDEX ON $s.orders (item_id);
		ALTER TABLE $s.merchants REPLICA IDENTITY FULL;
		ALTER TABLE $s.items REPLICA IDENTITY FULL;
		ALTER TABLE $s.orders REPLICA IDENTITY FULL;
		INSERT INTO $s.merchants
		  SELECT g, CASE WHEN random() < 0.15 THEN NULL ELSE 'r' || (g % 4) END, g % 3
		  FROM generate_series(1, $merchants) g;
		INSERT INTO $s.items
		  SELECT g, CASE WHEN random() < 0.1 THEN NULL ELSE 'c' || (g % 3) END
		  FROM generate_series(1, $items) g;
		INSERT INTO $s.orders
		  SELECT g, CASE WHEN random() < 0.05 THEN NULL ELSE 1 + (random() * ($merchants - 1))::int END,
		         1 + (random() * ($items - 1))::int, 1 + (random() * 8)::int,
		         round((random() * 1000)::numeric, 2),
		         CASE WHEN random() < 0.3 THEN NULL ELSE (random() * 100)::int END,
		         (random() * 9e15)::bigint, 's' || (g % 3)
		  FROM generate_series(1, $orders, 2) g;});
	foreach my $t (@targets)
	{
		my $options = $t =~ /small/ ? q{'{"max_batch_size": 20}'} : q{'{}'};
		$node->safe_psql('postgres',
			"SELECT delta_join.create_view('$t', \$q\$ $views{$t} \$q\$, strategy => 'auto', options => $options)");
		like(DeltaJoinTest::explain_text($node, $views{$t}, 'auto'),
			qr/added to their groups' counts and sums \(additive\)/,
			"seed $seed: explain says $t is additive");
	}
	DeltaJoinTest::targets_ok($node, "seed $seed: after backfill",
		[ map { [ $_, $views{$_} ] } @targets ]);

	DeltaJoinWorkload::pgbench_ok(
		$node, DeltaJoinWorkload::write_scripts(order_scripts($s)),
		"seed $seed: writes on orders only",
		seed => $seed,
		clients => 4,
		transactions => 500,
		rate => 1500);
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'),
		"seed $seed: wait() after the writes on orders");
	DeltaJoinTest::targets_ok($node, "seed $seed: after writes on orders only",
		[ map { [ $_, $views{$_} ] } @targets ]);

	# one transaction larger than the worker's batch: its keys spill to disk
	# and are read back in chunks, their weights summed.  (First a small
	# one: the last batch of the stream may have been cut short, and the
	# batch after such a one is recomputed, worker_exactly_once.)
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET delta_join.max_batch_size = 40; SELECT pg_reload_conf(); SELECT pg_sleep(0.3);"
		  . "UPDATE $s.orders SET qty = qty WHERE id = (SELECT min(id) FROM $s.orders)");
	ok(DeltaJoinWorkload::wait_views($node, undef, '60s'),
		"seed $seed: wait() after a small transaction");
	my $spill_start = -s $node->logfile;
	$node->safe_psql('postgres',
		"BEGIN; UPDATE $s.orders SET qty = qty + 1, amount = amount + 1, note = note + 1 WHERE id % 3 <> 0;"
		  . "UPDATE $s.orders SET merchant_id = merchant_id % $merchants + 1 WHERE id % 5 = 0; COMMIT;");
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'),
		"seed $seed: wait() after a transaction larger than a batch");
	$node->safe_psql('postgres',
		"ALTER SYSTEM RESET delta_join.max_batch_size; SELECT pg_reload_conf(); SELECT pg_sleep(0.3)");
	DeltaJoinTest::targets_ok($node, "seed $seed: after a transaction larger than a batch",
		[ map { [ $_, $views{$_} ] } @targets ]);
	my $spill_log = slurp_file($node->logfile, $spill_start);
	like($spill_log, qr/were spilled to disk/, "seed $seed: the large transaction spilled");
	like($spill_log, qr/additive apply: \d+ changed rows of $s\.orders/,
		"seed $seed: the spilled batch was added") if $additive;

	# one source changed: its spilled keys are read a chunk at a time, never
	# all in memory -- their deltas summed per group, or the groups they
	# lead to gathered
	my ($chunks) = $additive
	  ? $spill_log =~ /additive apply: \d+ changed rows of $s\.orders, .*; read in (\d+) chunks/
	  : $spill_log =~ /groups through joins: \d+ groups found from \d+ changed rows read in (\d+) chunks/;
	cmp_ok($chunks // 0, '>', 1,
		"seed $seed: the spilled keys of one source were read a chunk at a time");

	# a backlog of writes on orders, with WAL of a table no view reads
	# between them, read by a worker that was stopped: its batches are cut
	# short (full, with much WAL left), and the views' keys are held until
	# a batch reaches the end of the WAL.  The held keys keep their
	# weights, summed: that batch adds them all.
	$node->safe_psql('postgres',
		"CREATE TABLE $s.filler (pad text);"
		  . "ALTER SYSTEM SET delta_join.max_batch_size = 40; SELECT pg_reload_conf(); SELECT pg_sleep(0.3);"
		  . "UPDATE $s.orders SET qty = qty WHERE id = (SELECT min(id) FROM $s.orders)");
	ok(DeltaJoinWorkload::wait_views($node, undef, '60s'),
		"seed $seed: wait() before the backlog");
	my $pid = DeltaJoinWorkload::worker_pid($node);
	ok(DeltaJoinWorkload::stop_worker_idle($node, $pid), "seed $seed: the worker is stopped idle");
	my $held_start = -s $node->logfile;
	DeltaJoinWorkload::pgbench_ok(
		$node,
		DeltaJoinWorkload::write_scripts(
			order_scripts($s),
			filler => [ 4, "INSERT INTO $s.filler SELECT repeat('x', 300) FROM generate_series(1, 3000);\n" ]),
		"seed $seed: a backlog of writes on orders",
		seed => $seed + 2,
		clients => 4,
		transactions => 150);
	kill 'CONT', $pid;
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'), "seed $seed: wait() after the backlog");
	$node->safe_psql('postgres',
		"ALTER SYSTEM RESET delta_join.max_batch_size; SELECT pg_reload_conf(); SELECT pg_sleep(0.3)");
	DeltaJoinTest::targets_ok($node, "seed $seed: after a backlog whose batches were cut",
		[ map { [ $_, $views{$_} ] } @targets ]);
	my $held_log = slurp_file($node->logfile, $held_start);
	like($held_log, qr/the keys it held \(a backlog/, "seed $seed: keys were held behind cut batches");
	like($held_log, qr/additive apply: \d+ changed rows of $s\.orders/,
		"seed $seed: the held keys were added") if $additive;

	DeltaJoinWorkload::pgbench_ok(
		$node,
		DeltaJoinWorkload::write_scripts(order_scripts($s), source_scripts($s)),
		"seed $seed: writes on every source",
		seed => $seed + 1,
		clients => 4,
		transactions => 500,
		rate => 1500);
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'),
		"seed $seed: wait() after the writes on every source");
	DeltaJoinTest::targets_ok($node, "seed $seed: after writes on every source",
		[ map { [ $_, $views{$_} ] } @targets ]);
	DeltaJoinWorkload::statuses_ok($node, \@targets, "seed $seed");

	# what the worker did, from its log
	my $log = slurp_file($node->logfile, $log_start);
	my @added = $log =~ /additive apply: (\d+) changed rows of $s\.\w+, (\d+) groups, (\d+) of them recomputed/g;
	my ($batches, $recomputed) = (@added / 3, 0);
	$recomputed += $added[ 3 * $_ + 2 ] foreach 0 .. $batches - 1;
	if ($additive)
	{
		cmp_ok($batches, '>', 5, "seed $seed: batches were added ($batches)");
		cmp_ok($recomputed, '>', 0,
			"seed $seed: groups adding could not settle were recomputed ($recomputed)");
	}
	else
	{
		is($batches, 0, "seed $seed: with additive_aggregates off, no batch was added");
	}
}

# ---- a refresh() the worker has not seen: its fill holds changes the next
# batch decodes, which must not be added on top (worker_exactly_once) ----
additive_apply(1);
{
	my $s = "s$run[-1]";
	my $t = "$s.add_region";
	my %views = queries($s);
	my $pid = DeltaJoinWorkload::worker_pid($node);
	ok(DeltaJoinWorkload::stop_worker_idle($node, $pid), 'refresh: the worker is stopped idle');
	$node->safe_psql('postgres',
		"INSERT INTO $s.orders VALUES (900001, 1, 1, 7, 70.00, 7, 7, 's1');"
		  . "UPDATE $s.orders SET qty = qty + 100 WHERE merchant_id = 2;"
		  . "SELECT delta_join.refresh('$t');");
	kill 'CONT', $pid;
	ok(DeltaJoinWorkload::wait_views($node, undef, '60s'), 'refresh: wait() returns true');
	DeltaJoinTest::target_ok($node, $t, $views{$t},
		'refresh: changes both the fill and the next batch hold are counted once');

	# and a concurrent refresh under a stream of order writes
	my $stream = DeltaJoinWorkload::pgbench_start($node,
		DeltaJoinWorkload::write_scripts(order_scripts($s)),
		seed => 86, clients => 2, seconds => 3, rate => 400);
	$node->safe_psql('postgres', "SELECT delta_join.refresh('$t', concurrently => true)");
	my $res = DeltaJoinWorkload::pgbench_finish($stream);
	ok($res->{failed} == 0 && $res->{processed} > 0,
		"concurrent refresh: the stream ran $res->{processed} transactions");
	ok(DeltaJoinWorkload::wait_views($node, undef, '60s'), 'concurrent refresh: wait() returns true');
	DeltaJoinTest::target_ok($node, $t, $views{$t},
		'concurrent refresh: changes both the fill and later batches hold are counted once');
}

# ---- a view registered with its narrow keys (the orders' replica identity
# was an index on (id, merchant_id) at its creation, which logs the join's
# column but not the summed one, so it could not be additive) stays on the
# recompute after the identity becomes FULL, and refresh() registers its
# wide keys: from then on its batches are added ----
{
	my $s = 'narrow';
	my $t = "$s.by_region";
	my $q = "SELECT m.region, count(*) AS n, sum(o.qty) AS q
		FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id GROUP BY m.region";
	$node->safe_psql(
		'postgres', qq{
		CREATE SCHEMA $s;
		CREATE TABLE $s.merchants (id int PRIMARY KEY, region text NOT NULL);
		CREATE TABLE $s.orders (id int PRIMARY KEY, merchant_id int NOT NULL, qty int NOT NULL);
		CREATE INDEX ON $s.orders (merchant_id);
		CREATE UNIQUE INDEX orders_id_merchant ON $s.orders (id, merchant_id);
		ALTER TABLE $s.orders REPLICA IDENTITY USING INDEX orders_id_merchant;
		ALTER TABLE $s.merchants REPLICA IDENTITY FULL;
		INSERT INTO $s.merchants SELECT g, 'r' || (g % 4) FROM generate_series(1, 20) g;
		INSERT INTO $s.orders SELECT g, 1 + g % 20, g % 9 FROM generate_series(1, 300) g;
		SELECT delta_join.create_view('$t', \$q\$ $q \$q\$, strategy => 'auto');
		ALTER TABLE $s.orders REPLICA IDENTITY FULL;});
	my $write = "UPDATE $s.orders SET qty = qty + 1 WHERE id % 3 = 0";
	my $added_to = sub {
		my ($log_start) = @_;
		return scalar(() = slurp_file($node->logfile, $log_start)
			  =~ /additive apply: \d+ changed rows of $s\.orders/g);
	};
	my $log_start = -s $node->logfile;
	$node->safe_psql('postgres', $write);
	ok(DeltaJoinWorkload::wait_views($node, undef, '60s'), 'narrow keys: wait() returns true');
	is($added_to->($log_start), 0, 'narrow keys: the batch was recomputed, not added');
	like($node->safe_psql('postgres', "SELECT delta_join.refresh('$t')"), qr/^\d+$/,
		'narrow keys: refresh()');
	# (the first batch after the refresh is recomputed: the fill may have
	# seen its changes, worker_exactly_once)
	$node->safe_psql('postgres', $write);
	ok(DeltaJoinWorkload::wait_views($node, undef, '60s'), 'wide keys: wait() returns true');
	$log_start = -s $node->logfile;
	$node->safe_psql('postgres', "$write; DELETE FROM $s.orders WHERE id % 10 = 0;");
	ok(DeltaJoinWorkload::wait_views($node, undef, '60s'), 'wide keys: wait() returns true again');
	cmp_ok($added_to->($log_start), '>', 0, 'wide keys: after refresh() batches were added');
	DeltaJoinTest::target_ok($node, $t, $q, 'wide keys: the target equals its query');
}

# ---- the comparison can fail ----
{
	my $s = "s$run[0]";
	my $t = "$s.add_region";
	my %views = queries($s);
	$node->safe_psql('postgres',
		"SELECT delta_join.drop_view('$t', false);"
		  . "UPDATE $t SET n = n + 1 WHERE region = 'r1'");
	my ($missing, $extra) =
	  @{ DeltaJoinTest::target_diff($node, $t, $views{$t}) }{qw(missing extra)};
	is("$missing|$extra", '1|1', 'self-check: a tampered group is reported');
}

$node->stop;
done_testing();
