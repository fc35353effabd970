# A target among the tables of a logical-replication subscription.
#
# A subscription's apply worker fires row triggers only, never statement
# triggers: it wrote rows into a target past the guard trigger
# (delta_join_guard is a statement trigger), and the view stayed active,
# wait() true, with the publisher's rows in its target -- silently wrong.
# The tablesync's COPY fires the guard, so only copy_data = false let the
# rows in.  Now a target may not be a table of a subscription: CREATE
# SUBSCRIPTION and ALTER SUBSCRIPTION ... REFRESH PUBLICATION that would
# make it one are refused, naming the view, and so is a view made on a
# table a subscription writes (the worker checks it too when it loads a
# view, which then goes to error).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('target_subscription');
my $connstr = $node->connstr . ' dbname=pub';

# the publisher: a database of the same server, with a table named as the
# target, and its slot made by hand (a subscription cannot make a slot in
# its own server)
$node->safe_psql('postgres', 'CREATE DATABASE pub');
$node->safe_psql(
	'pub', q{
	CREATE TABLE per_m (m bigint PRIMARY KEY, n bigint, total numeric);
	CREATE TABLE other (m bigint PRIMARY KEY, n bigint, total numeric);
	CREATE PUBLICATION p FOR TABLE per_m, other;
	SELECT pg_create_logical_replication_slot('s1', 'pgoutput');});

my $query = 'SELECT m, count(*) AS n, sum(amt) AS total FROM orders GROUP BY m';
$node->safe_psql(
	'postgres', qq{
	CREATE TABLE orders (m bigint, k bigint, amt numeric, PRIMARY KEY (m, k));
	CREATE TABLE other (m bigint PRIMARY KEY, n bigint, total numeric);
	INSERT INTO orders SELECT m, k, k FROM generate_series(1, 5) m, generate_series(1, 3) k;
	SELECT delta_join.create_view('per_m', \$q\$ $query \$q\$);});

my ($ret, $out, $err) = $node->psql('postgres',
	"CREATE SUBSCRIPTION s1 CONNECTION '$connstr' PUBLICATION p
	 WITH (create_slot = false, slot_name = 's1', copy_data = false)");
like($err, qr/cannot run CREATE SUBSCRIPTION: delta view "public.per_m" would no longer be correct/,
	'CREATE SUBSCRIPTION of a target is refused');
like($err, qr/target "public.per_m" is a table of subscription "s1"/, '... saying why');

# what the publisher writes does not reach the target
$node->safe_psql('pub', 'INSERT INTO per_m VALUES (99, 1, 1)');
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (1, 9, 9)');
# (had the subscription been made, its worker would start within seconds)
foreach (1 .. 30)
{
	last
	  if $node->safe_psql('postgres',
		'SELECT NOT EXISTS (SELECT FROM pg_subscription) OR EXISTS (SELECT FROM per_m WHERE m = 99)') eq 't';
	sleep 1;
}
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'wait()');
DeltaJoinTest::target_ok($node, 'per_m', $query, 'per_m: the publisher wrote nothing into it');

# a subscription made without connecting has no tables; its refresh would
# give it the target
$node->safe_psql('postgres',
	"CREATE SUBSCRIPTION s1 CONNECTION '$connstr' PUBLICATION p
	 WITH (connect = false, slot_name = 's1')");
$node->safe_psql('postgres', 'ALTER SUBSCRIPTION s1 ENABLE');
($ret, $out, $err) = $node->psql('postgres',
	'ALTER SUBSCRIPTION s1 REFRESH PUBLICATION WITH (copy_data = false)');
like($err, qr/cannot run ALTER SUBSCRIPTION: delta view "public.per_m" would no longer be correct/,
	'ALTER SUBSCRIPTION ... REFRESH PUBLICATION that takes a target is refused');

# with the target out of the publication, the refresh takes the other table,
# which cannot then become a target
$node->safe_psql('pub', 'ALTER PUBLICATION p DROP TABLE per_m');
$node->safe_psql('postgres', 'ALTER SUBSCRIPTION s1 REFRESH PUBLICATION WITH (copy_data = false)');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT delta_join.create_view('other', \$q\$ $query \$q\$)");
like($err, qr/target "public.other" is a table of subscription "s1"/,
	'create_view on a table of a subscription is refused');

is($node->safe_psql('postgres', "SELECT state FROM delta_join.status WHERE target::regclass = 'per_m'::regclass"),
	'active', 'the view stays active');

done_testing();
