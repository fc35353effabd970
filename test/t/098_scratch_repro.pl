use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;
use DeltaJoinOuterOld;
my $node = DeltaJoinTest::new_node('main');
my $clients = 4;
for my $round (1 .. 14)
{
	my $seed = 90001 + 1000 * $round;
	my $s = "r$round";
	DeltaJoinOuterOld::create_schema($node, $s, $seed);
	$node->safe_psql('postgres', "SELECT pg_create_logical_replication_slot('hist_$round', 'test_decoding')");
	my %views;
	foreach my $name (sort keys %DeltaJoinOuterOld::views)
	{
		my $q = DeltaJoinOuterOld::in_schema($DeltaJoinOuterOld::views{$name}[0], $s);
		$node->safe_psql('postgres', "SELECT delta_join.create_view('$s.${name}_rt', \$q\$ $q \$q\$, options => '{\"retract\": true}')");
		$node->safe_psql('postgres', "SELECT delta_join.create_view('$s.${name}_up', \$q\$ $q \$q\$)");
		$views{"$s.${name}_rt"} = $q;
	}
	DeltaJoinWorkload::pgbench_ok($node, DeltaJoinOuterOld::scripts($s, $clients), "round $round",
		seed => $seed, clients => $clients, rate => 1500, transactions => 2000);
	ok(DeltaJoinWorkload::wait_views($node, undef, '180s'), 'wait');
	my $bad = 0;
	foreach my $t (sort keys %views)
	{
		my ($m, $e) = DeltaJoinWorkload::diff_counts($node, $t, $views{$t});
		if ($m + $e > 0) { $bad++; DeltaJoinWorkload::is_view_equal($node, $t, $views{$t}, "round $round");
			diag($node->safe_psql('postgres', qq{
			  SELECT 'rows', * FROM $t ORDER BY 2, 3, 4, 5;
			  SELECT 'hist', lsn, xid, data FROM pg_logical_slot_peek_changes('hist_$round', NULL, NULL)
			  WHERE data LIKE 'BEGIN%' OR data LIKE 'COMMIT%' OR data ~ 'table $s\\.(fa|fb|c_rt):'}));
		}
	}
	ok($bad == 0, "round $round: all retract views equal");
	last if $bad;
	$node->safe_psql('postgres', "SELECT delta_join.drop_view(target::text) FROM delta_join.views; SELECT pg_drop_replication_slot('hist_$round')");
}
$node->stop;
done_testing();
