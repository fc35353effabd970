# create_view(..., concurrently => true) and refresh(..., concurrently =>
# true) where the database or the login role sets transaction defaults
# that the calling session sets otherwise.
#
# The concurrent operations take their steps in a background worker that
# logs in as the caller's login role, so it takes the defaults of ALTER
# DATABASE / ALTER ROLE ... SET, not the caller's session's.  A database
# whose default isolation is SERIALIZABLE refused a caller that runs READ
# COMMITTED ("delta views cannot be created or refreshed in a REPEATABLE
# READ or SERIALIZABLE transaction ... Use READ COMMITTED"), and a role
# whose default is read-only refused a caller whose session writes
# ("cannot execute CREATE TABLE in a read-only transaction").  The steps
# now run READ COMMITTED and read-write, as the caller checked it may.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('concurrent_login_defaults');
DeltaJoinTest::worked_example($node);
$node->safe_psql(
	'postgres', q{
	CREATE ROLE app LOGIN;
	GRANT SELECT, INSERT, UPDATE ON orders, items TO app;
	GRANT CREATE ON SCHEMA public TO app;
	ALTER DATABASE postgres SET default_transaction_isolation = 'serializable';
	ALTER ROLE app SET default_transaction_read_only = on;});

# The caller's session overrides both defaults, as an application's
# connection options would
my $caller = "SET default_transaction_isolation = 'read committed';\n"
  . "SET default_transaction_read_only = off;\n"
  . "SET SESSION AUTHORIZATION app;\n";

my ($ret, $out, $err) = $node->psql(
	'postgres',
	$caller . "SELECT delta_join.create_view('wide', \$q\$ $DeltaJoinTest::wide_query \$q\$, "
	  . "concurrently => true);");
is($err, '', 'a concurrent create under SERIALIZABLE and read-only defaults the caller overrides');
is($out, 'wide', '... makes the view');

($ret, $out, $err) = $node->psql('postgres',
	$caller
	  . "SELECT delta_join.create_view('summary', \$q\$ $DeltaJoinTest::summary_query \$q\$, "
	  . "concurrently => true);");
is($err, '', 'so does one of an aggregate');

$node->safe_psql('postgres',
	q{UPDATE items SET item_name = item_name || ' (new)' WHERE item_id <= 3;
	  INSERT INTO orders VALUES (1, 1, 1000, 5);});
($ret, $out, $err) = $node->psql('postgres',
	$caller . "SELECT delta_join.refresh('wide', concurrently => true) >= 0;");
is($err, '', 'a concurrent refresh under the same defaults');
is($out, 't', '... refreshes the view');

is( $node->safe_psql(
		'postgres',
		"SET default_transaction_isolation = 'read committed'; SELECT delta_join.wait(NULL, '60s')"),
	't',
	'the views are fresh');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query, 'the join view');
DeltaJoinTest::target_ok($node, 'summary', $DeltaJoinTest::summary_query, 'the aggregate view');
is( $node->safe_psql(
		'postgres', "SELECT string_agg(state, ',' ORDER BY target::text) FROM delta_join.views"),
	'active,active',
	'both views are active');

# A caller whose own session is read-only is still refused, in its session
($ret, $out, $err) = $node->psql(
	'postgres',
	"SET default_transaction_read_only = on;\n"
	  . "SELECT delta_join.refresh('wide', concurrently => true);",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like(
	$err,
	qr/ERROR:  25006: cannot execute delta_join.refresh\(target, concurrently => true\) in a read-only transaction/,
	'a read-only caller is refused');

$node->stop;
done_testing();
