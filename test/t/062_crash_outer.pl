# Crashes under outer-join and retract-mode views (DESIGN.md §6.2).
#
# The schema, views and random writes of 052_differential_outer
# (DeltaJoinOuter.pm): inserts, updates, deletes and join-key moves on every
# source.  Views: users LEFT JOIN domains in upsert and in retract mode,
# orders LEFT JOIN items in upsert mode, fa FULL JOIN fb in both modes,
# orders JOIN merchants LEFT JOIN items and orders JOIN items (filtered) in
# retract mode.
#
#  1. pgbench streams writes while the apply worker is killed with SIGKILL
#     (kill -9 of the 'delta_join worker' process), three times: the
#     postmaster restarts every process, the stream's connections are cut
#     and a new stream starts after each restart;
#  2. the same with the server stopped in mode immediate (no shutdown
#     checkpoint) mid-stream and started again, twice.
#
# After each part, when the streams have ended: delta_join.wait() returns
# true; each retract view equals its query exactly; each upsert view holds
# every row of its query, only residual rows beside them, and no
# null-extended row beside a joined row of the same preserved-side key
# (DeltaJoinWorkload::is_outer_upsert); every view is active.  Writes after
# the crashes are applied too.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use DeltaJoinTest;
use DeltaJoinWorkload;
use DeltaJoinOuter;

my $seed = 6262;
my $s = 'c';
my $clients = 3;

# a killed backend must restart the server (PostgreSQL::Test::Cluster turns
# restart_after_crash off)
my $node = DeltaJoinTest::new_node('main',
	conf => { restart_after_crash => 'on' });

DeltaJoinOuter::create_schema($node, $s, $seed);
my %V = %DeltaJoinOuter::views;
# target => [ query, spec (undef: retract) ]
my %views = (
	"$s.b_up" => [ DeltaJoinOuter::in_schema($V{b}[0], $s), $V{b}[1] ],
	"$s.b_rt" => [ DeltaJoinOuter::in_schema($V{b}[0], $s), undef ],
	"$s.a_up" => [ DeltaJoinOuter::in_schema($V{a}[0], $s), $V{a}[1] ],
	"$s.c_up" => [ DeltaJoinOuter::in_schema($V{c}[0], $s), $V{c}[1] ],
	"$s.c_rt" => [ DeltaJoinOuter::in_schema($V{c}[0], $s), undef ],
	"$s.d_rt" => [ DeltaJoinOuter::in_schema($V{d}[0], $s), undef ],
	"$s.i_rt" =>
	  [ DeltaJoinOuter::in_schema($DeltaJoinOuter::inner_query, $s), undef ]);
foreach my $t (sort keys %views)
{
	my ($q, $spec) = @{ $views{$t} };
	my $options = defined $spec ? '{}' : '{"retract": true}';
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$t', \$q\$ $q \$q\$, options => '$options')");
}
my $scripts = DeltaJoinOuter::scripts($s, $clients);

sub check_views
{
	my ($name) = @_;
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'),
		"$name: wait() returns true");
	foreach my $t (sort keys %views)
	{
		my ($q, $spec) = @{ $views{$t} };
		if (defined $spec)
		{
			DeltaJoinTest::target_ok($node, $t, $q, $name, %$spec);
		}
		else
		{
			DeltaJoinTest::target_ok($node, $t, $q, "$name (retract)");
		}
	}
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM delta_join.status WHERE state = 'active' AND last_error IS NULL"
		),
		scalar(keys %views),
		"$name: every view is active, with no error")
	  or diag(DeltaJoinTest::status_text($node));
}

# ---- 1. SIGKILL of the worker while writes go on ----

my $crashes = 0;
for my $round (1 .. 3)
{
	my $stream = DeltaJoinWorkload::pgbench_start(
		$node, $scripts,
		seed => $seed + $round,
		clients => $clients,
		rate => 600,
		seconds => 5);
	usleep(1_000_000 + 400_000 * $round);
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
	log_like => [
		qr/terminated by signal 9: Killed/,
		qr/all server processes terminated; reinitializing/
	]);
check_views('after SIGKILL of the worker');

# ---- 2. immediate shutdown while writes go on ----

for my $round (1 .. 2)
{
	my $stream = DeltaJoinWorkload::pgbench_start(
		$node, $scripts,
		seed => $seed + 10 + $round,
		clients => $clients,
		rate => 600,
		seconds => 5);
	usleep(800_000 + 700_000 * $round);
	$node->stop('immediate');
	my $res = DeltaJoinWorkload::pgbench_finish($stream);
	note("round $round: the stream ran $res->{processed} transactions before the stop");
	$node->start;
}
check_views('after immediate shutdowns');

# ---- writes after the crashes are applied ----

DeltaJoinWorkload::pgbench_ok($node, $scripts, 'after the crashes',
	seed => $seed + 20,
	clients => $clients,
	transactions => 500);
check_views('writes after the crashes');

# ---- the comparisons can fail ----

$node->safe_psql(
	'postgres', qq{
	SELECT delta_join.drop_view('$s.b_rt', false);
	SELECT delta_join.drop_view('$s.b_up', false);
	UPDATE $s.b_rt SET firstname = 'tampered'
	WHERE user_id = (SELECT min(user_id) FROM $s.b_rt);
	DELETE FROM $s.b_up WHERE (user_id, domain_id) IN (SELECT user_id, domain_id FROM $s.b_rt);
	INSERT INTO $s.b_up SELECT DISTINCT user_id, firstname, lastname, NULL::bigint, NULL::text
	  FROM $s.b_rt WHERE domain_id IS NOT NULL;});
my ($missing, $extra) = @{ DeltaJoinTest::target_diff($node, "$s.b_rt",
	$views{"$s.b_rt"}[0]) }{qw(missing extra)};
ok($missing > 0 && $missing == $extra,
	"self-check: tampered rows of the exact target are reported ($missing)");
my $c = DeltaJoinTest::target_diff($node, "$s.b_up", $views{"$s.b_up"}[0],
	%{ $views{"$s.b_up"}[1] });
ok($c->{missing} > 0 && $c->{beside} > 0,
	"self-check: lost rows and null-extended rows beside joined ones are reported "
	  . "($c->{missing}, $c->{beside})");

$node->stop;
done_testing();
