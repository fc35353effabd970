# Limits of the server's resources, and what a view says when it meets one.
#
# Shared memory keeps the progress of at most delta_join.max_views views,
# over all databases.  The worker of a database frees the entries of the
# views it no longer finds, but a database dropped with its views has no
# worker left to do so: its entries were kept until the server restarted,
# and after a few DROP DATABASE the server refused every new view, "too
# many delta views", though far fewer than max_views existed.  An entry of
# a database that no longer exists is free.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('resource_limits',
	conf => { 'delta_join.max_views' => 3 },
	extension => 0);

# A database with $n views (as many as it could create), applied.
sub database_with_views
{
	my ($db, $n) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql(
		$db, q{
		CREATE EXTENSION delta_join;
		CREATE TABLE acct (id bigint PRIMARY KEY, v text);
		INSERT INTO acct VALUES (1, 'one');});
	foreach my $i (1 .. $n)
	{
		my ($ret, $out, $err) = $node->psql($db,
			"SELECT delta_join.create_view('acct_copy$i', 'SELECT id, v FROM acct')");
		is($ret, 0, "$db: view $i is created") or diag($err);
	}
	$node->safe_psql($db, "INSERT INTO acct VALUES (2, 'two')");
	is($node->safe_psql($db, "SELECT delta_join.wait(NULL, '30s')"),
		't', "$db: its views are applied");
}

# ---- the entries of a dropped database are free again ----

database_with_views('first', 3);
my ($ret, $out, $err) = $node->psql('first',
	"SELECT delta_join.create_view('one_too_many', 'SELECT id, v FROM acct')");
like($err, qr/too many delta views: shared memory has room for 3/,
	'a view beyond delta_join.max_views is refused');

$node->safe_psql('postgres', 'DROP DATABASE first WITH (FORCE)');
database_with_views('second', 3);
is( $node->safe_psql(
		'second', "SELECT string_agg(state, ',') FROM delta_join.status"),
	'active,active,active',
	'after DROP DATABASE of a database with views, their places serve new views');

$node->stop;
done_testing();
