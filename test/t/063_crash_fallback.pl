# Crashes under fallback maintenance (DESIGN.md §2 "Fallback maintenance",
# §6.2).
#
# Nine views in one database that a delta view cannot express, maintained
# by keyed recompute (a join on an unindexed column with both primary keys
# in its select list; GROUP BY an unindexed column of a REPLICA IDENTITY
# FULL table; an aggregate without GROUP BY) or by full recompute (a
# window function, SELECT DISTINCT, an EXISTS subquery, UNION ALL without
# a tag -- a multiset target --, GROUP BY outside the replica identity, an
# aggregate over a join), all with refresh_interval 100ms.  pgbench streams
# seeded random writes on every source (upserts, updates, moves between
# groups and join partners, deletes, primary-key changes) while:
#
#  1. the apply worker is terminated (SIGTERM), three times, while the
#     stream goes on: the launcher starts a new worker, which resumes from
#     the slot's confirmed position;
#  2. the apply worker is killed with SIGKILL, four times: the postmaster
#     restarts every process, the stream's connections are cut and a new
#     stream is started for each round;
#  3. the server is stopped with mode immediate and started again, four
#     times.
#
# Each kill / stop is aimed at a moment when the worker is applying a view
# (pg_stat_activity shows the view it applies), of full recompute and of
# keyed recompute in turn, so that it lands in the middle of writing a
# difference when it can.
#
# A full recompute writes its difference in one transaction, so a reader
# never sees half of one: the window view's target must be internally
# consistent at any moment -- per customer, ranks 1..n without gaps and
# each running sum the previous one plus the row's amount -- which is
# checked while the stream goes on and right after each restart, before
# anything is waited for.  After each part, when the stream has ended,
# delta_join.wait() returns true, every target equals its query (EXCEPT ALL
# both ways) and every view is active with no error.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use DeltaJoinTest;
use DeltaJoinWorkload;

my $seed = 6363;
my $custs = 300;
my $orders = 4000;
my $events = 1500;
my $categories = 40;
my $rounds = 4;    # of SIGKILL, and of immediate stops

# a killed backend must restart the server (PostgreSQL::Test::Cluster turns
# restart_after_crash off)
my $node = DeltaJoinTest::new_node('main',
	conf => { restart_after_crash => 'on' });

my $FULL = 'full recompute';
my $KEYED = 'keyed recompute';

# target => [ query, mode ]
my %views = (
	order_rank => [
		q{SELECT o.id, o.cust, o.amount, rank() OVER w AS rnk, sum(o.amount) OVER w AS running
  FROM orders o
  WINDOW w AS (PARTITION BY o.cust ORDER BY o.amount DESC, o.id)}, $FULL
	],
	region_status => [
		q{SELECT DISTINCT c.region, o.status FROM orders o JOIN custs c ON c.id = o.cust},
		$FULL
	],
	busy_custs => [
		q{SELECT c.id, c.name FROM custs c
  WHERE EXISTS (SELECT FROM orders o WHERE o.cust = c.id AND o.status = 'open')}, $FULL
	],
	all_labels => [
		q{SELECT c.region AS label FROM custs c UNION ALL SELECT o.status FROM orders o},
		$FULL
	],
	status_summary => [
		q{SELECT status, count(*) AS n, sum(amount) AS total FROM orders GROUP BY status},
		$FULL
	],
	region_sales => [
		q{SELECT c.region, count(*) AS n, sum(o.amount) AS total, max(o.id) AS last_order
  FROM orders o JOIN custs c ON c.id = o.cust GROUP BY c.region}, $FULL
	],
	order_custs => [
		q{SELECT o.id AS order_id, c.id AS cust_id, c.region, c.name, o.amount, o.status
  FROM orders o JOIN custs c ON c.id = o.cust}, $KEYED
	],
	category_summary => [
		q{SELECT category, count(*) AS n, sum(val) AS total, max(label) AS max_label
  FROM events GROUP BY category}, $KEYED
	],
	order_totals => [
		q{SELECT count(*) AS n, sum(amount) AS total, max(id) AS last_id FROM orders},
		$KEYED
	],);
my %queries = map { ($_ => $views{$_}[0]) } keys %views;

$node->safe_psql(
	'postgres', qq{
	SELECT setseed(0.6363);
	CREATE SEQUENCE rekeyed START 1000000;
	CREATE TABLE custs (id int PRIMARY KEY, region text, tier int, name text);
	CREATE TABLE orders (
	  id int PRIMARY KEY, cust int, amount numeric(12,2) NOT NULL, status text);
	CREATE TABLE events (
	  id int PRIMARY KEY, category int NOT NULL, val numeric, label text);
	ALTER TABLE events REPLICA IDENTITY FULL;
	INSERT INTO custs
	  SELECT i, 'r' || (i % 7), i % 3, 'c' || i FROM generate_series(1, $custs) i;
	INSERT INTO orders
	  SELECT i, 1 + (random() * ($custs - 1))::int, round((random() * 1000)::numeric, 2),
	         (ARRAY['open', 'done', 'void', 'held'])[1 + (random() * 3)::int]
	  FROM generate_series(1, $orders) i;
	INSERT INTO events
	  SELECT i, 1 + (random() * ($categories - 1))::int, round((random() * 100)::numeric, 3),
	         'first-' || i
	  FROM generate_series(1, $events) i;});
foreach my $t (sort keys %views)
{
	$node->safe_psql('postgres',
		    "SELECT delta_join.create_view('$t', \$q\$ $views{$t}[0] \$q\$, "
		  . q{strategy => 'auto', options => '{"refresh_interval": "100ms"}')});
	is( $node->safe_psql('postgres',
			"SELECT mode FROM delta_join.views WHERE target::regclass = '$t'::regclass"),
		$views{$t}[1],
		"$t is maintained by $views{$t}[1]");
}

my $pick = qq{\\set c random(1, $custs + 20)
\\set o random(1, $orders)
\\set e random(1, $events)
\\set k random(1, $categories)
\\set a random(0, 100000)
\\set n random(0, 9)
};
my $status = q{(ARRAY['open', 'done', 'void', 'held'])[1 + :n % 4]};
my $scripts = DeltaJoinWorkload::write_scripts(
	upsert_order => [
		5, $pick . qq{INSERT INTO orders VALUES (:o, :c, :a / 100.0, $status)
  ON CONFLICT (id) DO UPDATE SET amount = excluded.amount, status = excluded.status;
}
	],
	move_order => [
		3, $pick . q{UPDATE orders SET cust = :c WHERE id = :o;
}
	],
	delete_order => [
		2, $pick . q{DELETE FROM orders WHERE id = :o;
}
	],
	rekey_order => [
		1, $pick . q{UPDATE orders SET id = nextval('rekeyed') WHERE id = :o;
}
	],
	upsert_cust => [
		2, $pick . q{INSERT INTO custs VALUES (:c, 'r' || :n % 8, :n % 3, 'c' || :c || '-' || :a)
  ON CONFLICT (id) DO UPDATE SET region = excluded.region, name = excluded.name;
}
	],
	delete_cust => [
		1, $pick . q{DELETE FROM custs WHERE id = :c;
}
	],
	upsert_event => [
		3, $pick . q{INSERT INTO events VALUES (:e, :k, :a / 1000.0, 'l' || :n || '-' || :e)
  ON CONFLICT (id) DO UPDATE SET val = excluded.val, label = excluded.label;
}
	],
	move_event => [
		2, $pick . q{UPDATE events SET category = :k WHERE id = :e;
}
	],
	delete_event => [
		1, $pick . q{DELETE FROM events WHERE id = :e;
}
	],
	transaction => [
		2, $pick . qq{BEGIN;
UPDATE custs SET region = 'r' || :n % 8 WHERE id = :c;
UPDATE orders SET status = $status, amount = amount + 1 WHERE cust = :c;
UPDATE events SET category = :k WHERE id = :e;
COMMIT;
}
	]);

# Rows of order_rank's target that a whole result cannot hold: per
# customer, ranks are 1..n (the order is total) and each running sum is
# the previous one plus the row's amount
my $torn_sql = q{
	SELECT count(*) FROM (
	  SELECT rnk, running, amount,
	         row_number() OVER w AS rn, lag(running) OVER w AS prev
	  FROM order_rank WINDOW w AS (PARTITION BY cust ORDER BY rnk)) r
	WHERE rnk <> rn OR running <> coalesce(prev, 0) + amount};

sub torn_rows
{
	my ($ret, $out) = $node->psql('postgres', $torn_sql);
	return $ret == 0 ? $out : undef;
}

# every target equals its query, every view is active with no error
sub check_views
{
	my ($name) = @_;
	DeltaJoinWorkload::check_views($node, \%queries, $name);
	is( $node->safe_psql(
			'postgres', q{
		SELECT string_agg(target, ', ' ORDER BY target) FROM delta_join.status
		WHERE state <> 'active' OR last_error IS NOT NULL}),
		'',
		"$name: every view is active, with no error")
	  or diag(DeltaJoinTest::status_text($node));
}

# Waits up to $seconds for the worker to be applying a view of $mode;
# returns its pid and whether it was caught applying one
sub worker_applying
{
	my ($mode, $seconds) = @_;
	my $names = join(', ', map { "'$_'" } grep { $views{$_}[1] eq $mode } keys %views);
	my $deadline = time() + $seconds;
	while (time() < $deadline)
	{
		my ($ret, $out) = $node->psql(
			'postgres', qq{
			SELECT pid FROM pg_stat_activity
			WHERE backend_type = 'delta_join worker' AND state = 'active'
			  AND regexp_replace(query, '^.*\\.', '') IN ($names)});
		return ($out, 1) if $ret == 0 && $out =~ /^\d+$/;
	}
	return (DeltaJoinWorkload::worker_pid($node), 0);
}

check_views('after backfill');

# ---- 1. SIGTERM of the worker while the stream goes on ----

{
	my $stream = DeltaJoinWorkload::pgbench_start(
		$node, $scripts,
		seed => $seed,
		clients => 3,
		seconds => 6,
		rate => 400);
	my (@killed, @torn);
	my $samples = 0;
	for my $round (1 .. 3)
	{
		# read the window target over and over meanwhile
		my $until = time() + 1.2;
		while (time() < $until)
		{
			my $torn = torn_rows();
			$samples++;
			push @torn, $torn if !defined $torn || $torn ne '0';
		}
		my ($pid) = worker_applying($round % 2 ? $FULL : $KEYED, 1);
		$pid = DeltaJoinWorkload::worker_pid($node, 20, \@killed)
		  if !defined $pid || grep { $_ == $pid } @killed;
		next unless defined $pid;
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
		push @killed, $pid;
	}
	my $res = DeltaJoinWorkload::pgbench_finish($stream);
	is(scalar(@killed), 3, 'SIGTERM: the worker was found and terminated 3 times');
	ok($res->{rc} == 0 && $res->{failed} == 0 && $res->{processed} > 0,
		"SIGTERM: the stream ran on ($res->{processed} transactions)")
	  or diag("pgbench exit status $res->{rc}\n$res->{stdout}\n$res->{stderr}");
	is(join(',', map { $_ // 'query failed' } @torn), '',
		"SIGTERM: the window target held a whole result each of the $samples times it was read during the stream");
	ok(defined DeltaJoinWorkload::worker_pid($node, 20, \@killed),
		'SIGTERM: the launcher starts a new worker');
	check_views('after SIGTERM of the worker');
}

# ---- 2. SIGKILL of the worker: crash and restart of the server ----

{
	my ($crashes, $mid, @torn) = (0, 0);
	for my $round (1 .. $rounds)
	{
		my $stream = DeltaJoinWorkload::pgbench_start(
			$node, $scripts,
			seed => $seed + $round,
			clients => 3,
			seconds => 4,
			rate => 400);
		usleep(500_000 + 300_000 * $round);
		my $mode = $round % 2 ? $FULL : $KEYED;
		my ($pid, $caught) = worker_applying($mode, 2);
		if (defined $pid)
		{
			kill 'KILL', $pid;
			$crashes++;
			$mid += $caught;
		}
		# the crash cuts the stream's connections; it ends on its own
		my $res = DeltaJoinWorkload::pgbench_finish($stream);
		note("SIGKILL round $round: "
			  . ($caught ? "while applying a $mode" : "not caught applying a $mode")
			  . ", the stream ran $res->{processed} transactions before the crash");
		DeltaJoinWorkload::poll_until($node, 'SELECT true', 30)
		  or BAIL_OUT('the server did not come back after the crash');
		my $torn = torn_rows();
		push @torn, "round $round: " . ($torn // 'query failed')
		  if !defined $torn || $torn ne '0';
	}
	is($crashes, $rounds, "SIGKILL: the worker was found and killed $rounds times");
	note("SIGKILL: $mid of $rounds kills landed while the worker applied a view of the mode aimed at");
	$node->log_check(
		'SIGKILL: the postmaster restarted the server',
		0,
		log_like => [
			qr/terminated by signal 9: Killed/,
			qr/all server processes terminated; reinitializing/
		]);
	is(join('; ', @torn), '',
		'SIGKILL: right after each restart the window target holds a whole result');
	ok(defined DeltaJoinWorkload::worker_pid($node, 30),
		'SIGKILL: a worker runs again after the restart');
	check_views('after SIGKILL of the worker');
}

# ---- 3. immediate shutdown of the server ----

{
	my ($mid, @torn) = (0);
	for my $round (1 .. $rounds)
	{
		my $stream = DeltaJoinWorkload::pgbench_start(
			$node, $scripts,
			seed => $seed + 10 + $round,
			clients => 3,
			seconds => 4,
			rate => 400);
		usleep(400_000 + 300_000 * $round);
		my $mode = $round % 2 ? $FULL : $KEYED;
		my (undef, $caught) = worker_applying($mode, 2);
		$node->stop('immediate');
		$mid += $caught;
		my $res = DeltaJoinWorkload::pgbench_finish($stream);
		note("immediate stop round $round: "
			  . ($caught ? "while applying a $mode" : "not caught applying a $mode")
			  . ", the stream ran $res->{processed} transactions before the stop");
		$node->start;
		my $torn = torn_rows();
		push @torn, "round $round: " . ($torn // 'query failed')
		  if !defined $torn || $torn ne '0';
		check_views("after immediate shutdown $round");
	}
	note("immediate stop: $mid of $rounds stops landed while the worker applied a view of the mode aimed at");
	is(join('; ', @torn), '',
		'immediate stop: right after each restart the window target holds a whole result');
}

# ---- maintenance goes on, and the slot moves past new writes ----

my $slot = 'delta_join_'
  . $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'postgres'");
my $before = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
DeltaJoinWorkload::pgbench_ok(
	$node, $scripts, 'after the crashes',
	seed => $seed + 20,
	clients => 3,
	transactions => 300);
check_views('writes after the crashes');
is( $node->safe_psql(
		'postgres', q{
	SELECT count(*) FROM delta_join.status
	WHERE last_recompute IS NULL OR changes_seen = 0}),
	'0',
	'every view has seen changes and recomputed');
ok( DeltaJoinWorkload::poll_until(
		$node,
		"SELECT confirmed_flush_lsn > '$before' FROM pg_replication_slots WHERE slot_name = '$slot'",
		20),
	'the slot confirms positions past the writes made after the crashes');

# ---- the checks can fail ----

$node->safe_psql(
	'postgres', q{
	SELECT delta_join.drop_view('order_rank', false);
	UPDATE order_rank SET running = running + 1 WHERE id = (SELECT min(id) FROM order_rank);});
ok(torn_rows() > 0, 'self-check: a running sum changed behind the worker is seen as torn');
my ($missing, $extra) =
  @{ DeltaJoinTest::target_diff($node, 'order_rank', $queries{order_rank}) }{qw(missing extra)};
is("$missing|$extra", '1|1', 'self-check: and as a difference from the query');

$node->stop;
done_testing();
