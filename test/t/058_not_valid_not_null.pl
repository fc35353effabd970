# A NOT NULL constraint added NOT VALID (PostgreSQL 18) leaves the rows from
# before it as they were, NULLs included, though it sets attnotnull.  What
# delta_join proves from NOT NULL must take only valid constraints:
#
#  - NOT IN is the anti-join NOT EXISTS only between columns never NULL: a
#    NULL among the subquery's values leaves NOT IN no row at all, where
#    NOT EXISTS keeps them;
#  - a unique index is a key of the rows (a semi-join taken as a DISTINCT,
#    the result's key) only over columns never NULL: two NULLs are two
#    rows, which a DISTINCT would merge.
#
# Each view is made with strategy auto and compared with its query; before
# the check read the constraint's validity, both were silently wrong.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::init_node('not_valid');
if ($node->pg_version < 18)
{
	plan skip_all => 'NOT NULL constraints are NOT VALID from PostgreSQL 18 on';
}
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION delta_join');

$node->safe_psql(
	'postgres', q{
	CREATE TABLE accounts (id int PRIMARY KEY, owner int NOT NULL, code int, k int);
	CREATE UNIQUE INDEX ON accounts (code);
	CREATE INDEX ON accounts (k);
	CREATE TABLE banned (id int PRIMARY KEY, owner int);
	CREATE TABLE marks (id int PRIMARY KEY, k int);
	CREATE INDEX ON banned (owner);
	CREATE INDEX ON marks (k);
	ALTER TABLE accounts REPLICA IDENTITY FULL;
	ALTER TABLE banned REPLICA IDENTITY FULL;
	ALTER TABLE marks REPLICA IDENTITY FULL;
	INSERT INTO accounts VALUES (1, 10, NULL, 1), (2, 20, NULL, 1), (3, 30, 3, 2);
	INSERT INTO banned VALUES (1, 10), (2, NULL);
	INSERT INTO marks VALUES (1, 1), (2, 2);
	ALTER TABLE banned ADD CONSTRAINT banned_owner_nn NOT NULL owner NOT VALID;
	ALTER TABLE accounts ADD CONSTRAINT accounts_code_nn NOT NULL code NOT VALID;});

my %views = (
	not_in => 'SELECT a.id, a.owner FROM accounts a WHERE a.owner NOT IN (SELECT owner FROM banned)',
	semi_by_code => 'SELECT a.code, a.k FROM accounts a WHERE EXISTS (SELECT 1 FROM marks m WHERE m.k = a.k)');

foreach my $t (sort keys %views)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$t', \$q\$ $views{$t} \$q\$, strategy => 'auto')");
	is($node->safe_psql('postgres', "SELECT mode FROM delta_join.views WHERE target::regclass = 'public.$t'::regclass"),
		'full recompute', "$t: a NOT VALID NOT NULL proves nothing, so it stays on full recompute")
	  or diag(DeltaJoinTest::explain_text($node, $views{$t}, 'auto'));
	DeltaJoinTest::target_ok($node, $t, $views{$t}, "$t: after backfill");
}
like(DeltaJoinTest::explain_text($node, $views{not_in}, 'auto'),
	qr/a column that NOT IN compares may be NULL/, 'not_in: explain() says the column may be NULL');

# changes while the NULLs are there, then after they went
$node->safe_psql('postgres', q{
	INSERT INTO accounts VALUES (4, 40, 4, 1), (5, 50, 5, 1);
	INSERT INTO marks VALUES (3, 1);
	UPDATE accounts SET k = 1 WHERE id = 3;});
ok($node->safe_psql('postgres', 'SELECT delta_join.wait()') eq 't', 'wait() returns true');
DeltaJoinTest::target_ok($node, $_, $views{$_}, "$_: after changes, NULLs kept") foreach sort keys %views;
$node->safe_psql('postgres', 'UPDATE banned SET owner = 20 WHERE id = 2');
ok($node->safe_psql('postgres', 'SELECT delta_join.wait()') eq 't', 'wait() returns true');
DeltaJoinTest::target_ok($node, $_, $views{$_}, "$_: after the NULL went") foreach sort keys %views;

# once validated, the constraints prove the columns never NULL again
$node->safe_psql('postgres', q{
	UPDATE accounts SET code = id + 100 WHERE code IS NULL;
	ALTER TABLE banned VALIDATE CONSTRAINT banned_owner_nn;
	ALTER TABLE accounts VALIDATE CONSTRAINT accounts_code_nn;});
like(DeltaJoinTest::explain_text($node, $views{not_in}, 'auto'),
	qr/mode: keyed recompute \(groups through joins\)/, 'not_in: with the constraint valid, NOT IN is taken by key');
like(DeltaJoinTest::explain_text($node, $views{semi_by_code}, 'auto'),
	qr/mode: keyed recompute \(groups through joins\)/, 'semi_by_code: with the constraint valid, code is a key');

$node->stop;
done_testing();
