# ALTER EXTENSION delta_join UPDATE keeps the privileges an administrator
# gave create_view and refresh.
#
# The update from 0.1 to 0.2 makes both functions anew (they gain an
# argument).  It made them executable by PUBLIC again: a database whose
# administrator had revoked create_view from PUBLIC, so that only some
# roles make views, let every role make them after the update.  The
# privileges are now carried over, as current privileges (not initial
# ones, which pg_dump leaves out), so that a dump restores them too.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('update_grants', extension => 0);

$node->safe_psql(
	'postgres', q{
	CREATE ROLE "Alice Admin";
	CREATE ROLE someone;
	CREATE EXTENSION delta_join VERSION '0.1';
	REVOKE EXECUTE ON FUNCTION delta_join.create_view(text, text, text, jsonb) FROM PUBLIC;
	GRANT EXECUTE ON FUNCTION delta_join.create_view(text, text, text, jsonb) TO "Alice Admin";
	GRANT EXECUTE ON FUNCTION delta_join.refresh(text) TO "Alice Admin" WITH GRANT OPTION;});

my $privileges = q{
	SELECT string_agg(r || ' ' || f || ' ' || has_function_privilege(r, f, 'EXECUTE')
	                  || ' ' || has_function_privilege(r, f, 'EXECUTE WITH GRANT OPTION'),
	                  ', ' ORDER BY f, r)
	FROM unnest(ARRAY['Alice Admin', 'someone']) r,
	     (SELECT p.oid::regprocedure::text AS f FROM pg_proc p
	      WHERE p.pronamespace = 'delta_join'::regnamespace
	        AND p.proname IN ('create_view', 'refresh')) f};
my $expected =
	'Alice Admin delta_join.create_view(text,text,text,jsonb,boolean) true false, '
  . 'someone delta_join.create_view(text,text,text,jsonb,boolean) false false, '
  . 'Alice Admin delta_join.refresh(text,boolean) true true, '
  . 'someone delta_join.refresh(text,boolean) true false';

# An object depending on a function the update replaces keeps it from
# running; the error names the function as the user knows it (the update
# renames the old one before it drops it)
$node->safe_psql('postgres',
	q{CREATE FUNCTION nightly() RETURNS bigint LANGUAGE sql
	  BEGIN ATOMIC SELECT delta_join.refresh('t'); END;});
my ($ret, $out, $err) =
  $node->psql('postgres', 'ALTER EXTENSION delta_join UPDATE',
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like(
	$err,
	qr/ERROR:  2BP01: cannot update delta_join: function public\.nightly\(\) depends on function delta_join\.refresh\(target text\), which the update replaces/,
	'an object depending on refresh(text) is named');
$node->safe_psql('postgres', 'DROP FUNCTION nightly()');

$node->safe_psql('postgres', 'ALTER EXTENSION delta_join UPDATE');
is($node->safe_psql('postgres', $privileges),
	$expected, 'the update keeps the privileges given to create_view and refresh');
is( $node->safe_psql(
		'postgres', q{
		SELECT count(*) FROM pg_init_privs
		WHERE objoid IN ('delta_join.create_view'::regproc, 'delta_join.refresh'::regproc)}),
	'0',
	'... as current privileges, not initial ones, as after a fresh install');

($ret, $out, $err) = $node->psql('postgres', 'DROP ROLE "Alice Admin"');
like(
	$err,
	qr/privileges for function delta_join\.create_view/,
	'... on which the role depends');

# a dump gives them back, its CREATE EXTENSION making the functions anew
DeltaJoinTest::dump_restore($node, 'postgres', 'restored', 'a dump of the updated database');
is($node->safe_psql('restored', $privileges), $expected, 'the restored database has them');

$node->stop;
done_testing();
