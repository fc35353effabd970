# A standby: delta_join.views and delta_join.status are readable there
# (with the primary's catalog, as replicated); the functions that change
# views, and wait(), refuse with a clear "not on a standby" error.  No
# launcher or worker runs on a standby, and its targets follow the
# primary's through replication.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $primary = DeltaJoinTest::new_node('primary');
DeltaJoinTest::worked_example($primary);
$primary->safe_psql('postgres',
	"SELECT delta_join.create_view('wide', '$DeltaJoinTest::wide_query');"
	  . "SELECT delta_join.create_view('summary', '$DeltaJoinTest::summary_query')");

$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;

$primary->safe_psql('postgres', 'INSERT INTO orders VALUES (1, 1, 1000, 5)');
is($primary->safe_psql('postgres', 'SELECT delta_join.wait()'), 't', 'the primary applies');
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is( $standby->safe_psql('postgres',
		'SELECT string_agg(target || \':\' || kind || \':\' || state, \' \' ORDER BY target) FROM delta_join.views'),
	'public.summary:aggregate:active public.wide:join:active',
	'delta_join.views is readable on the standby');
is( $standby->safe_psql('postgres',
		'SELECT string_agg(target || \':\' || state, \' \' ORDER BY target) FROM delta_join.status'),
	'public.summary:active public.wide:active',
	'delta_join.status is readable on the standby');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM wide WHERE order_id = 1000'),
	'1', 'the targets follow the primary through replication');
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'delta_join%'"),
	'0', 'no launcher or worker runs on the standby');

foreach my $call (
	"delta_join.create_view('w2', '$DeltaJoinTest::wide_query')",
	"delta_join.drop_view('wide')",
	"delta_join.refresh('wide')",
	"delta_join.wait()")
{
	my ($name) = $call =~ /^delta_join\.(\w+)/;
	my ($ret, $out, $err) = $standby->psql('postgres', "SELECT $call");
	like($err, qr/ERROR:  delta_join\.$name\(\) cannot run on a standby/,
		"$name() refuses on a standby");
}

$standby->stop;
$primary->stop;
done_testing();
