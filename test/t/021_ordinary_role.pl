# Ordinary roles that log in (DESIGN.md §5 "Who applies", §6.7): no code a
# role controls ever runs with more rights than its own.  alice, who may
# read and write the sources, makes a view; mallory, logged in as herself,
# tries what she can against it: shadow a function the query calls, read
# the query view, write, refresh or drop the target, read the view's
# errors, make a view over tables she cannot read, and put code on a
# target she is given.  Every attempt fails, alice's view stays right,
# and mallory is still no superuser.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('roles');
DeltaJoinTest::worked_example($node);
$node->safe_psql(
	'postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE ROLE mallory LOGIN;
	CREATE SCHEMA app;
	GRANT USAGE, CREATE ON SCHEMA app TO alice;
	GRANT USAGE ON SCHEMA app TO mallory;
	GRANT CREATE ON SCHEMA public TO mallory;
	GRANT SELECT, UPDATE ON orders, items TO alice;
	CREATE FUNCTION app.label(t text) RETURNS text LANGUAGE sql IMMUTABLE
	  AS $$ SELECT upper(t) $$;});

# run SQL logged in as a role; returns (exit code, stdout, stderr)
sub as_role
{
	my ($role, $sql) = @_;
	my ($stdout, $stderr);
	my $rc = $node->psql(
		'postgres', $sql,
		stdout => \$stdout,
		stderr => \$stderr,
		extra_params => [ '-U', $role ]);
	return ($rc, $stdout, $stderr);
}

sub mallory_is_superuser
{
	return $node->safe_psql('postgres',
		"SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'");
}

my $query =
  'SELECT o.merchant_id, o.order_id, o.item_id, label(i.item_name) AS name '
  . 'FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id';
my ($rc, $out, $err) = as_role('alice',
	"SET search_path = public, app; SELECT delta_join.create_view('app.wide', \$q\$ $query \$q\$)");
is($rc, 0, 'alice, logged in, makes a view over tables she may read') or diag $err;
is( $node->safe_psql('postgres',
		"SELECT runs_as FROM delta_join.views WHERE target = 'app.wide'"),
	'alice', 'it runs as alice');

# a function made later to shadow the one the query calls
($rc, $out, $err) = as_role(
	'mallory', q{
	CREATE FUNCTION public.label(t text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
	BEGIN
	  ALTER ROLE mallory SUPERUSER;
	  RETURN t;
	END $$;});
is($rc, 0, 'mallory makes a function of the same name in public');
$node->safe_psql('postgres',
	"INSERT INTO items VALUES (9, 1, 'fig'); INSERT INTO orders VALUES (9, 1, 900, 5)");
is($node->safe_psql('postgres', "SELECT delta_join.wait('app.wide', '60s')"),
	't', 'the view applies the new rows');
is($node->safe_psql('postgres', 'SELECT name FROM app.wide WHERE order_id = 900'),
	'FIG', 'with the function it was bound to');

# the view's objects are alice's
foreach my $attempt (
	[ 'reads the query view', 'SELECT * FROM delta_join."app.wide"' ],
	[ 'writes the target', 'DELETE FROM app.wide' ],
	[ 'refreshes the view', "SELECT delta_join.refresh('app.wide')" ],
	[ 'drops the view', "SELECT delta_join.drop_view('app.wide')" ],
	[
		'makes a view over tables she cannot read',
		"SELECT delta_join.create_view('public.mine', \$q\$ $query \$q\$)"
	])
{
	($rc, $out, $err) = as_role('mallory', $attempt->[1]);
	isnt($rc, 0, "mallory cannot: $attempt->[0]");
	like($err, qr/ERROR:  (permission denied|must be owner|cannot)/,
		"... with a clear error ($attempt->[0])");
}

# errors may quote rows: only the owner's roles read them
$node->safe_psql('postgres',
	"UPDATE delta_join.view_catalog SET last_error = 'row (9, 900)' "
	  . "WHERE target = 'app.wide'::regclass");
($rc, $out, $err) = as_role('mallory',
	"SELECT last_error FROM delta_join.status WHERE target = 'app.wide'");
is($out, '(shown to the owner of the target only)', 'mallory cannot read the view\'s error');
($rc, $out, $err) = as_role('alice',
	"SELECT last_error FROM delta_join.status WHERE target = 'app.wide'");
is($out, 'row (9, 900)', 'alice can');
$node->safe_psql('postgres',
	"UPDATE delta_join.view_catalog SET last_error = NULL WHERE target = 'app.wide'::regclass");

# a target given to mallory: her trigger runs as her, not as alice
$node->safe_psql('postgres',
	"GRANT SELECT ON orders, items TO mallory; ALTER TABLE app.wide OWNER TO mallory");
($rc, $out, $err) = as_role(
	'mallory', q{
	CREATE FUNCTION public.grab() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  ALTER ROLE mallory SUPERUSER;
	  RETURN NEW;
	END $$;
	CREATE TRIGGER grab AFTER INSERT ON app.wide FOR EACH ROW EXECUTE FUNCTION public.grab();});
is($rc, 0, 'mallory, now the owner, puts a trigger on the target') or diag $err;
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (9, 1, 901, 6)');
$node->safe_psql('postgres', "SELECT delta_join.wait('app.wide', '10s')");
ok( $node->poll_query_until(
		'postgres',
		"SELECT state = 'error' FROM delta_join.status WHERE target = 'app.wide'"),
	'the trigger fails with mallory\'s rights: the view goes to error');

is(mallory_is_superuser(), 'f', 'mallory is still no superuser');

$node->stop;
done_testing();
