# The DDL guard in a session whose session_replication_role is replica.
#
# Event triggers, like triggers, are skipped in such a session (as a
# migration or bulk-load tool sets it) unless they are enabled ALWAYS.
# The guard's were not: DETACH PARTITION of a partitioned source took the
# partition's rows out of the source without a change to decode, nothing
# refreshed the views, and they stayed active, wait() true, with the
# detached rows in their targets -- silently wrong.  ATTACH PARTITION
# likewise left the attached rows out.  Now the guard runs there as
# anywhere: the views are refreshed in the same transaction.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('replica_role');

$node->safe_psql(
	'postgres', q{
	CREATE TABLE orders (m bigint, i bigint, oid bigint, amt numeric,
						 PRIMARY KEY (m, i, oid)) PARTITION BY RANGE (m);
	CREATE TABLE orders_1 PARTITION OF orders FOR VALUES FROM (1) TO (10);
	CREATE TABLE orders_2 PARTITION OF orders FOR VALUES FROM (10) TO (20);
	CREATE TABLE items (m bigint, i bigint, name text, PRIMARY KEY (m, i));
	INSERT INTO items SELECT m, i, 'item ' || m || '/' || i
	  FROM generate_series(1, 30) m, generate_series(1, 3) i;
	INSERT INTO orders SELECT m, i, k, k FROM generate_series(1, 19) m,
	  generate_series(1, 3) i, generate_series(1, 2) k;
	CREATE TABLE orders_3 (LIKE orders INCLUDING ALL);
	INSERT INTO orders_3 SELECT m, i, 7, 7 FROM generate_series(20, 25) m, generate_series(1, 3) i;});

my %views = (
	wide => 'SELECT o.m, o.oid, o.i, it.name, o.amt FROM orders o JOIN items it ON o.m = it.m AND o.i = it.i',
	per_m => 'SELECT m, count(*) AS n, sum(amt) AS total FROM orders GROUP BY m');
foreach my $t (sort keys %views)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$t', \$q\$ $views{$t} \$q\$, options => '{\"retract\": true}')");
}

sub check
{
	my ($when) = @_;

	# a change after the DDL, so that wait() has something to wait for
	$node->safe_psql('postgres', 'INSERT INTO orders VALUES (1, 1, 99, 1)');
	$node->safe_psql('postgres', 'DELETE FROM orders WHERE oid = 99');
	is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', "$when: wait()");
	DeltaJoinTest::target_ok($node, $_, $views{$_}, "$_: $when") foreach sort keys %views;
}

$node->safe_psql('postgres', q{
	SET session_replication_role = replica;
	ALTER TABLE orders DETACH PARTITION orders_2;});
check('after DETACH PARTITION under session_replication_role replica');

$node->safe_psql('postgres', q{
	SET session_replication_role = replica;
	ALTER TABLE orders ATTACH PARTITION orders_3 FOR VALUES FROM (20) TO (30);});
check('after ATTACH PARTITION under session_replication_role replica');

is( $node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT evtenabled::text, ',') FROM pg_event_trigger WHERE evtname LIKE 'delta_join%'"),
	'A', 'the guard event triggers are enabled ALWAYS');

done_testing();
