# Differential test of outer delta joins and of retract mode (DESIGN.md §2
# "Option retract", "Outer delta joins", "UNION ALL of delta branches";
# §6.1).
#
# For each seed of a fixed list, in a schema of its own, eleven views over
# seven tables, loaded before the views are created (backfill):
#
#   a  orders LEFT JOIN items on (merchant_id, item_id)          N:1
#   b  users LEFT JOIN domains ON d.user_id = u.id               1:N
#   c  fa FULL JOIN fb ON fa.k = fb.k (both sides' keys listed)  M:N
#   d  orders JOIN merchants LEFT JOIN items                     inner + outer
#   u  'web' orders JOIN items UNION ALL 'store' store_orders LEFT JOIN items
#
# each in upsert mode (the default, *_up) and in retract mode (*_rt), and
# i_rt: orders JOIN items with a filter on a column outside the key, in
# retract mode (rule 6 does not apply there).
#
# Then thousands of seeded random writes from concurrent pgbench clients
# (at a bounded rate, so that the worker applies while they go on) on
# EVERY source: inserts (upserts), updates, deletes and join-key moves --
# updates of a join column outside the primary key (an order's item, a
# domain's user, fa.k / fb.k) and updates of a primary key that is also a
# join key (an item's item_id, a user's id, a merchant's id, an order's
# merchant_id) --, multi-statement transactions and rolled-back ones.
# Inserts and primary-key moves only create keys of the client's own class
# (key mod clients = client_id), so no write fails on a unique violation.
# The tables, views and scripts are in DeltaJoinOuter.pm (062_crash_outer
# uses them too).  The query results are checked to hold both joined and
# null-extended rows, so that both kinds are exercised.
#
# After delta_join.wait():
#  - retract mode: the target equals its query (EXCEPT ALL both ways empty);
#  - upsert mode (DeltaJoinWorkload::is_outer_upsert): every row of the
#    query is in the target (query EXCEPT ALL target empty: a preserved row
#    whose last partner went has its null-extended row back, in place of
#    the joined one); every extra row is residual (the combination of
#    source keys it carries is no longer in the query); and no
#    null-extended row sits beside a joined row of the same preserved-side
#    key (for b: no row with domain_id IS NULL for a user_id that also has
#    a row with domain_id IS NOT NULL; for c, both ways);
#  - refresh() of an upsert view leaves it equal to its query.
#
# Then two races made to happen in FULL JOINs: applies that see the sources
# ahead of their batch (see below).
#
# Finally the comparisons themselves are checked: targets tampered with
# after drop_view(target, false) are reported.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;
use DeltaJoinOuter;

# every seed on every major (not DeltaJoinTest::seeds): the kinds of rows
# the queries must have are counted over the seeds together (count_kinds)
my @seeds = (17, 4242, 90001);
my $clients = 4;
my $transactions = 2000;    # per client
my $rate = 1500;            # transactions per second, all clients

my $node = DeltaJoinTest::new_node('main');

# ---- the views and the checks ----

# every view of schema $s: target => [ query, spec (undef: retract) ]
sub views_of
{
	my ($s) = @_;
	my %views;
	foreach my $name (sort keys %DeltaJoinOuter::views)
	{
		my ($query, $spec) = @{ $DeltaJoinOuter::views{$name} };
		$views{"$s.${name}_up"} = [ DeltaJoinOuter::in_schema($query, $s), $spec ];
		$views{"$s.${name}_rt"} = [ DeltaJoinOuter::in_schema($query, $s), undef ];
	}
	$views{"$s.i_rt"} = [ DeltaJoinOuter::in_schema($DeltaJoinOuter::inner_query, $s), undef ];
	return \%views;
}

sub check_views
{
	my ($views, $name) = @_;
	ok(DeltaJoinWorkload::wait_views($node, undef, '180s'),
		"$name: wait() returns true");
	DeltaJoinTest::targets_ok(
		$node, $name,
		[
			map {
				my ($q, $spec) = @{ $views->{$_} };
				defined $spec ? [ $_, $q, %$spec ] : [ $_, $q, name => "$name (retract)" ]
			} sort keys %$views
		]);
}

# The query's null-extended and joined rows, for each side of each outer
# view, added up over the seeds: both kinds must be there for the test to
# mean something.  One seed's end state may lack a kind (the concurrent
# clients interleave differently from run to run), all of them together
# practically never.
my %kinds;

sub count_kinds
{
	my ($views, $s) = @_;
	my (@kinds, @queries);
	foreach my $t (grep { defined $views->{$_}[1] } sort keys %$views)
	{
		my ($q, $spec) = @{ $views->{$t} };
		foreach my $side (@{ $spec->{sides} })
		{
			my ($preserved, $partner) = @$side;
			(my $view = $t) =~ s/^\Q$s.\E//;
			push @kinds, "$view, rows of $preserved->[0]";
			push @queries, qq{SELECT count(*) FILTER (WHERE $partner IS NULL),
				       count(*) FILTER (WHERE $partner IS NOT NULL)
				FROM ($q) q WHERE $preserved->[0] IS NOT NULL;\n};
		}
	}
	# one line of counts per query, in order
	my @counts = split /\n/, $node->safe_psql('postgres', join('', @queries));
	die 'count_kinds: expected ' . scalar(@queries) . ' lines, got ' . scalar(@counts)
	  unless @counts == @queries;
	foreach my $i (0 .. $#kinds)
	{
		my $kind = $kinds{ $kinds[$i] } //= [ 0, 0 ];
		my ($null_extended, $joined) = split /\|/, $counts[$i];
		$kind->[0] += $null_extended;
		$kind->[1] += $joined;
	}
}

foreach my $seed (@seeds)
{
	# set-based apply for every seed but the second, generic plans for that one
	DeltaJoinWorkload::set_based_apply($node, $seed != $seeds[1]);
	my $s = "s$seed";
	DeltaJoinOuter::create_schema($node, $s, $seed);
	my $views = views_of($s);
	my $create = '';
	foreach my $t (sort keys %$views)
	{
		my ($q, $spec) = @{ $views->{$t} };
		my $options = defined $spec ? '{}' : '{"retract": true}';
		$create .= "SELECT delta_join.create_view('$t', \$q\$ $q \$q\$, options => '$options');\n";
	}
	$node->safe_psql('postgres', $create);
	DeltaJoinTest::targets_ok($node, "seed $seed: after backfill",
		[ map { [ $_, $views->{$_}[0] ] } sort keys %$views ]);

	# ---- concurrent inserts, updates, deletes and key moves everywhere ----
	DeltaJoinWorkload::pgbench_ok(
		$node, DeltaJoinOuter::scripts($s, $clients), "seed $seed: random writes",
		seed => $seed,
		clients => $clients,
		rate => $rate,
		transactions => $transactions);
	check_views($views, "seed $seed");
	count_kinds($views, $s);
	DeltaJoinWorkload::statuses_ok($node, [ sort keys %$views ], "seed $seed");

	# ---- refresh() clears the residual rows of upsert views ----
	# (each refresh() writes its own target only)
	my @upsert = grep { defined $views->{$_}[1] } sort keys %$views;
	$node->safe_psql('postgres',
		join('', map { "SELECT delta_join.refresh('$_');\n" } @upsert));
	DeltaJoinTest::targets_ok($node, "seed $seed: after refresh()",
		[ map { [ $_, $views->{$_}[0] ] } @upsert ]);

	# ---- a second burst after the refresh ----
	DeltaJoinWorkload::pgbench_ok(
		$node, DeltaJoinOuter::scripts($s, $clients), "seed $seed: more random writes",
		seed => $seed + 1,
		clients => $clients,
		transactions => $transactions / 5);
	check_views($views, "seed $seed, second burst");

	# the views of this seed stop here (the worker has less to decode)
	$node->safe_psql('postgres',
		join('', map { "SELECT delta_join.drop_view('$_');\n" } sort keys %$views));
}

foreach my $kind (sort keys %kinds)
{
	my ($null_extended, $joined) = @{ $kinds{$kind} };
	ok($null_extended > 0 && $joined > 0,
		"the queries of $kind have null-extended ($null_extended) "
		  . "and joined ($joined) rows over the seeds");
}

# ---- races: applies that see the sources ahead of their batch ----
#
# Each view's apply reads the sources as they are when it runs, which may
# be ahead of its batch.  Two such races are made to happen in FULL JOINs
# (fa FULL JOIN fb ON fa.k = fb.k), holding batches up with row locks on
# the target of view v0, created first and so applied first in each batch:
#
#  1. fa 34, the only partner of fb 30, is deleted (batch 1); fa 78 joins
#     k = 12 while batch 1 waits (so batch 1 sees fb 30 joined to fa 78,
#     which batch 2 brings); fa 78 is deleted while batch 2 waits (so
#     batch 2 sees nothing of fa 78 to write);
#  2. fb 34 changes (batch 1), and fa 37, the only partner of fb 34 and
#     fb 35, is deleted while batch 1 waits (batch 2): batch 1 replaces
#     the rows of fa 37 while it handles fb 34.
#
# Each time fb 30 (fb 35) is left without partner: its null-extended row
# must be in both targets.

# $setup: rows of fa and fb; $steps: code run with a sub that holds up
# the worker's next batch on a row of v0 (returns a release sub)
sub race
{
	my ($s, $setup, $steps) = @_;
	my $q = DeltaJoinOuter::in_schema($DeltaJoinOuter::views{c}[0], $s);
	$node->safe_psql(
		'postgres', qq{
		CREATE SCHEMA $s;
		CREATE TABLE $s.blocker (id bigint PRIMARY KEY, v bigint);
		CREATE TABLE $s.fa (id bigint PRIMARY KEY, k bigint, av text);
		CREATE INDEX ON $s.fa (k);
		CREATE TABLE $s.fb (id bigint PRIMARY KEY, k bigint, bv text);
		CREATE INDEX ON $s.fb (k);
		INSERT INTO $s.blocker VALUES (1, 0), (2, 0);
		$setup
		SELECT delta_join.create_view('$s.v0',
		  'SELECT id, count(*) AS n, sum(v) AS v FROM $s.blocker GROUP BY id');
		SELECT delta_join.create_view('$s.c_rt', \$q\$ $q \$q\$,
		                              options => '{"retract": true}');
		SELECT delta_join.create_view('$s.c_up', \$q\$ $q \$q\$);});
	ok(DeltaJoinWorkload::wait_views($node), "$s: wait() returns true");

	# hold($id): a session locks row $id of v0's target; the batch that
	# changes group $id waits for it; returns (wait for the worker to
	# wait, release)
	my @sessions;
	my $hold = sub {
		my ($id) = @_;
		my $l = $node->background_psql('postgres');
		push @sessions, $l;
		$l->query_safe("BEGIN; SELECT FROM $s.v0 WHERE id = $id FOR UPDATE");
		my $pid = $l->query_safe('SELECT pg_backend_pid()');
		my $waits = sub {
			return DeltaJoinWorkload::poll_until(
				$node, qq{
				SELECT coalesce(bool_or(pg_blocking_pids(pid) \@> ARRAY[$pid]), false)
				FROM pg_stat_activity WHERE backend_type = 'delta_join worker'}, 20);
		};
		return ($waits, sub { $l->query_safe('COMMIT') });
	};
	$steps->($hold);
	$_->quit foreach @sessions;

	ok(DeltaJoinWorkload::wait_views($node), "$s: wait() returns true after the batches");
	DeltaJoinTest::target_ok($node, "$s.c_rt", $q,
		"$s: the partnerless fb row (retract)");
	DeltaJoinTest::target_ok($node, "$s.c_up", $q,
		"$s: the partnerless fb row", %{ $DeltaJoinOuter::views{c}[1] });
}

race(
	'race1', q{
	INSERT INTO race1.fa VALUES (34, 12, 'a34');
	INSERT INTO race1.fb VALUES (30, 12, 'b30');},
	sub {
		my ($hold) = @_;
		my ($waits1, $release1) = $hold->(1);
		my ($waits2, $release2) = $hold->(2);
		$node->safe_psql('postgres',
			'BEGIN; UPDATE race1.blocker SET v = v + 1 WHERE id = 1; DELETE FROM race1.fa WHERE id = 34; COMMIT;'
		);
		ok($waits1->(), 'race1: batch 1 waits');
		$node->safe_psql('postgres',
			"BEGIN; UPDATE race1.blocker SET v = v + 1 WHERE id = 2; INSERT INTO race1.fa VALUES (78, 12, 'a78'); COMMIT;"
		);
		$release1->();
		ok($waits2->(), 'race1: batch 2 waits');
		$node->safe_psql('postgres', 'DELETE FROM race1.fa WHERE id = 78');
		$release2->();
	});

race(
	'race2', q{
	INSERT INTO race2.fa VALUES (37, 3, 'a37');
	INSERT INTO race2.fb VALUES (34, 3, 'b34'), (35, 3, 'b35');},
	sub {
		my ($hold) = @_;
		my ($waits1, $release1) = $hold->(1);
		$node->safe_psql('postgres',
			"BEGIN; UPDATE race2.blocker SET v = v + 1 WHERE id = 1; UPDATE race2.fb SET bv = 'b34 v2' WHERE id = 34; COMMIT;"
		);
		ok($waits1->(), 'race2: batch 1 waits');
		$node->safe_psql('postgres', 'DELETE FROM race2.fa WHERE id = 37');
		$release1->();
	});

# ---- the comparisons can fail ----

{
	my $s = 'selfcheck';
	my $q = DeltaJoinOuter::in_schema($DeltaJoinOuter::views{b}[0], $s);
	DeltaJoinTest::worked_example($node, schema => $s, orders_items => 0, users_domains => 1);
	$node->safe_psql(
		'postgres', qq{
		INSERT INTO $s.users VALUES (1, 'ann', 'a'), (2, 'bob', 'b'), (3, 'cy', 'c');
		INSERT INTO $s.domains VALUES (10, 1, 'x.example'), (11, 1, 'y.example'),
		                              (12, 2, 'z.example');
		SELECT delta_join.create_view('$s.b_up', \$q\$ $q \$q\$);
		SELECT delta_join.create_view('$s.b_rt', \$q\$ $q \$q\$,
		                              options => '{"retract": true}');
		-- user 2 loses its only domain: its null-extended row replaces the
		-- joined one; user 3 gets its first; user 1 loses one of two: a
		-- residual row in upsert mode
		DELETE FROM $s.domains WHERE id = 12;
		INSERT INTO $s.domains VALUES (13, 3, 'w.example');
		DELETE FROM $s.domains WHERE id = 11;});
	ok(DeltaJoinWorkload::wait_views($node), 'self-check: wait() returns true');
	my $c = DeltaJoinTest::target_diff($node, "$s.b_up", $q,
		%{ $DeltaJoinOuter::views{b}[1] });
	is( "$c->{missing}|$c->{shadowed}|$c->{extra}|$c->{live_extra}|$c->{beside}",
		'0|0|1|0|0',
		'self-check: the untouched upsert target has one residual row and nothing else');
	DeltaJoinTest::target_ok($node, "$s.b_rt", $q,
		'self-check: the untouched retract target');

	$node->safe_psql(
		'postgres', qq{
		SELECT delta_join.drop_view('$s.b_up', false);
		SELECT delta_join.drop_view('$s.b_rt', false);
		-- a joined row lost, a value changed, a null-extended row lost, a
		-- null-extended row beside a joined one (the residual (1, 11))
		DELETE FROM $s.b_up WHERE domain_id = 10;
		UPDATE $s.b_up SET domain_name = 'tampered' WHERE domain_id = 13;
		DELETE FROM $s.b_up WHERE user_id = 2;
		INSERT INTO $s.b_up VALUES (1, 'ann', 'a', NULL, NULL);
		-- a change no view applies
		INSERT INTO $s.users VALUES (4, 'dee', 'd');
		-- and in the exact target, a value changed
		UPDATE $s.b_rt SET firstname = 'tampered' WHERE domain_id = 13;});
	$c = DeltaJoinTest::target_diff($node, "$s.b_up", $q,
		%{ $DeltaJoinOuter::views{b}[1] });
	# missing: (1, 10), (3, 13), (2, NULL), (4, NULL); extra: (1, 11)
	# residual, (3, 13 tampered) not residual, (1, NULL) beside (1, 11)
	is( "$c->{missing}|$c->{shadowed}|$c->{extra}|$c->{live_extra}|$c->{beside}",
		'4|0|3|1|1',
		'self-check: lost, changed and null-extended-beside-joined rows are all reported');
	my ($missing, $extra) =
	  @{ DeltaJoinTest::target_diff($node, "$s.b_rt", $q) }{qw(missing extra)};
	is("$missing|$extra", '2|1',
		'self-check: a changed row and a new user are reported in the exact target');
}

$node->stop;
done_testing();
