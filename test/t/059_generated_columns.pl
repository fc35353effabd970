# Generated columns of sources and targets, on every major that has them:
#
#  - (15+) an existing target with a generated column the query would
#    write is refused by the target check, naming the column (it failed
#    in the fill's INSERT before, or took the query's value on apply);
#  - (17+) ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION rewrites a
#    stored generated column's values without decodable changes: the views
#    over the table (its partitions, the tables it belongs to) are
#    refreshed in the DDL's transaction, or put in error when the DDL's
#    runner cannot act as the view's owner;
#  - (18) a generated column is VIRTUAL by default: the heap stores NULL
#    for it, so decoded rows and the rows a lookup fetches hold NULL where
#    the query computes the expression.  The paths that read such values --
#    a delta join (upsert, retract, outer, lookup cache or not), the group
#    key of a keyed aggregate, the group key and join conditions of groups
#    through joins -- refuse the column (rule 1 / 7, SQLSTATE 0A000);
#    strategy auto takes a recompute that runs the query, exactly.  Before,
#    each of those views was silently wrong (NULLs, wrong groups).
#  - (18) a temporal primary key (WITHOUT OVERLAPS) is a GiST index: a
#    rule-1 refusal that strategy auto falls back from, where it was an
#    internal error on every path.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::init_node('generated');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION delta_join');

# The error of a statement, with its SQLSTATE (VERBOSITY verbose)
sub error_of
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err;
}

sub create
{
	my ($target, $query, $strategy, $options) = @_;
	my $args = defined $strategy ? ", strategy => '$strategy'" : '';
	$args .= ", options => '$options'" if defined $options;
	return "SELECT delta_join.create_view('$target', \$q\$ $query \$q\$$args)";
}

# Each view of a hash (target => query), with strategy auto
sub create_auto
{
	my ($views) = @_;
	$node->safe_psql('postgres', create($_, $views->{$_}, 'auto')) foreach sort keys %$views;
	return;
}

sub mode_of
{
	my ($target) = @_;
	return $node->safe_psql('postgres',
		"SELECT mode FROM delta_join.views WHERE target::regclass = '$target'::regclass");
}

# ---- an existing target with a generated column ----

$node->safe_psql(
	'postgres', q{
	CREATE TABLE base (id int PRIMARY KEY, cid int NOT NULL, amt int);
	INSERT INTO base SELECT g, g % 3, g FROM generate_series(1, 10) g;
	CREATE TABLE gen_target (id int PRIMARY KEY, amt int, dbl int GENERATED ALWAYS AS (amt * 2) STORED);});
like(error_of(create('gen_target', 'SELECT id, amt, amt * 2 AS dbl FROM base')),
	qr/42P16: column "dbl" of target "public.gen_target" is a generated column/,
	'a target whose column is generated is refused by the target check (42P16)');

SKIP:
{
	skip 'SET EXPRESSION is from PostgreSQL 17 on', 8 if $node->pg_version < 17;

	# ---- SET EXPRESSION of a stored generated column ----

	$node->safe_psql(
		'postgres', q{
		CREATE TABLE s (id int PRIMARY KEY, cid int NOT NULL, amt int,
						amt2 int GENERATED ALWAYS AS (amt * 2) STORED);
		CREATE INDEX ON s (cid);
		CREATE TABLE c (id int PRIMARY KEY, name text);
		INSERT INTO c SELECT g, 'c' || g FROM generate_series(0, 4) g;
		INSERT INTO s (id, cid, amt) SELECT g, g % 5, g FROM generate_series(1, 20) g;
		CREATE TABLE p (id int, k int, v int, vs int GENERATED ALWAYS AS (v + 1) STORED,
						PRIMARY KEY (id, k)) PARTITION BY LIST (k);
		CREATE TABLE p1 PARTITION OF p FOR VALUES IN (1);
		CREATE TABLE p2 PARTITION OF p FOR VALUES IN (2);
		INSERT INTO p (id, k, v) SELECT g, 1 + g % 2, g FROM generate_series(1, 10) g;});
	my %stored = (
		s_join => 'SELECT s.id, s.cid, s.amt2, c.name FROM s JOIN c ON c.id = s.cid',
		s_agg => 'SELECT id, sum(amt2) AS total FROM s GROUP BY id',
		s_keyed => 'SELECT s.id, s.amt2 FROM s WHERE s.amt2 > 10',
		p_all => 'SELECT p.id, p.k, p.vs FROM p',
		p_one => 'SELECT p1.id, p1.k, p1.vs FROM p1');
	create_auto(\%stored);

	my ($ret, $out, $err) = $node->psql('postgres',
		'ALTER TABLE s ALTER COLUMN amt2 SET EXPRESSION AS (amt * 3)');
	like($err, qr/delta view "public.s_join" is refreshed because a generation expression of "s" changed/,
		'SET EXPRESSION on a source: its views are refreshed, with a NOTICE');
	DeltaJoinTest::target_ok($node, $_, $stored{$_}, "$_: after SET EXPRESSION of a stored column")
	  foreach qw(s_agg s_join s_keyed);

	# of a partitioned source: the views over it and over the partition
	$node->safe_psql('postgres', 'ALTER TABLE p ALTER COLUMN vs SET EXPRESSION AS (v + 100)');
	DeltaJoinTest::target_ok($node, $_, $stored{$_}, "$_: after SET EXPRESSION of the partitioned table")
	  foreach qw(p_all p_one);

	# by the owner of the source, who cannot act as the view's owner
	$node->safe_psql(
		'postgres', q{
		CREATE ROLE gen_owner;
		ALTER TABLE c OWNER TO gen_owner;
		ALTER TABLE c ADD COLUMN up text GENERATED ALWAYS AS (upper(name)) STORED;});
	$node->safe_psql('postgres', create('c_up', 'SELECT id, up FROM c'));
	$node->safe_psql('postgres',
		'SET ROLE gen_owner; ALTER TABLE c ALTER COLUMN up SET EXPRESSION AS (lower(name))');
	is($node->safe_psql('postgres',
			"SELECT state FROM delta_join.status WHERE target::regclass = 'c_up'::regclass"),
		'error', 'SET EXPRESSION by a role that cannot act as the view owner puts the view in error');
	$node->safe_psql('postgres',
		"SELECT delta_join.refresh('c_up'); SELECT delta_join.refresh('s_join')");
	DeltaJoinTest::target_ok($node, 'c_up', 'SELECT id, up FROM c', 'c_up: refreshed by its owner');
}

SKIP:
{
	skip 'virtual generated columns and temporal keys are from PostgreSQL 18 on', 29 if $node->pg_version < 18;

	# ---- virtual generated columns ----

	$node->safe_psql(
		'postgres', q{
		CREATE TABLE o (id int PRIMARY KEY, cid int NOT NULL, amt int,
						amt2 int GENERATED ALWAYS AS (amt * 2), grp int GENERATED ALWAYS AS (cid % 3));
		CREATE INDEX ON o (cid);
		ALTER TABLE o REPLICA IDENTITY FULL;
		CREATE TABLE u (id int PRIMARY KEY, name text, uname text GENERATED ALWAYS AS (upper(name)),
						idv int GENERATED ALWAYS AS (id));
		ALTER TABLE u REPLICA IDENTITY FULL;
		INSERT INTO u SELECT g, 'n' || g FROM generate_series(1, 5) g;
		INSERT INTO o (id, cid, amt) SELECT g, 1 + g % 5, g FROM generate_series(1, 20) g;});

	# every path that reads decoded or looked-up values refuses the column
	my %refused = (
		v_join => ['SELECT o.id, o.cid, o.amt2, u.uname FROM o JOIN u ON u.id = o.cid',
			'delta view rule 1: column o.amt2 of table "public.o" is a virtual generated column'],
		v_filter => ['SELECT o.id, o.cid FROM o JOIN u ON u.id = o.cid WHERE u.uname <> \'N1\'',
			'delta view rule 1: column u.uname of table "public.u" is a virtual generated column'],
		v_left => ['SELECT u.id AS uid, o.id AS oid, o.amt2 FROM u LEFT JOIN o ON o.cid = u.id',
			'delta view rule 1: column o.amt2 of table "public.o" is a virtual generated column'],
		v_union => ['SELECT \'a\' AS ch, id, amt2 FROM o UNION ALL SELECT \'b\', id, id FROM u',
			'delta view rule 1: column o.amt2 of table "public.o" is a virtual generated column'],
		v_group => ['SELECT grp, count(*) AS n FROM o GROUP BY grp',
			'delta view rule 7: column o.grp of table "public.o" is a virtual generated column']);
	foreach my $t (sort keys %refused)
	{
		like(error_of(create($t, $refused{$t}[0])), qr/0A000: \Q$refused{$t}[1]\E/,
			"$t: strategy eventual refuses the virtual column (0A000)");
	}
	like(error_of(create('v_retract', $refused{v_join}[0], undef, '{"retract": true}')),
		qr/0A000: \Q$refused{v_join}[1]\E/, 'v_retract: retract mode refuses it too');
	like($node->safe_psql('postgres',
			"SELECT string_agg(explain, E'\\n') FROM delta_join.explain(\$q\$ $refused{v_group}[0] \$q\$, strategy => 'none')"),
		qr/Not eligible for keyed recompute \(strategy none\):\n\s+\Q$refused{v_group}[1]\E/,
		'keyed recompute refuses a virtual group key too, which decoded rows hold NULL for');
	like($node->safe_psql('postgres',
			"SELECT string_agg(explain, E'\\n') FROM delta_join.explain(\$q\$ $refused{v_join}[0] \$q\$)"),
		qr/virtual generated column\n\s+hint: Write the column's generation expression in the query/,
		'explain() says why, with the hint');

	# strategy auto: a recompute that runs the query
	my %auto = (
		(map { $_ => $refused{$_}[0] } keys %refused),
		g_group => 'SELECT u.uname, sum(o.amt2) AS total FROM o JOIN u ON u.id = o.cid GROUP BY u.uname',
		g_cond => 'SELECT u.name, count(*) AS n FROM o JOIN u ON u.idv = o.cid GROUP BY u.name',
		g_distinct => 'SELECT DISTINCT u.uname, o.grp FROM o JOIN u ON u.id = o.cid',
		g_semi => 'SELECT u.id, u.uname FROM u WHERE EXISTS (SELECT 1 FROM o WHERE o.cid = u.id AND o.amt2 > 30)',
		d_agg => 'SELECT cid, sum(amt2) AS total, count(*) AS n FROM o WHERE amt2 > 4 GROUP BY cid',
		k_join => 'SELECT o.id AS oid, u.id AS uid, o.amt2, u.uname FROM o JOIN u ON u.id = o.amt');
	create_auto(\%auto);
	is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT mode, ', ' ORDER BY mode) FROM delta_join.views
			WHERE target::text ~ '^public\.(v|g)_'}),
		'full recompute, keyed recompute',
		'strategy auto takes a recompute for every view the delta path or the groups through joins refuse');
	is(mode_of('d_agg'), 'delta', 'd_agg: a delta aggregate reads a virtual column only by its query: kept');
	$node->safe_psql(
		'postgres', q{
		UPDATE o SET amt = amt + 100 WHERE id <= 5;
		INSERT INTO o (id, cid, amt) VALUES (100, 2, 7), (101, 3, 9);
		UPDATE u SET name = 'zz' WHERE id = 2;
		DELETE FROM o WHERE id = 20;
		UPDATE o SET cid = 4 WHERE id = 6;
		DELETE FROM u WHERE id = 1;});
	ok($node->safe_psql('postgres', 'SELECT delta_join.wait()') eq 't', 'wait() returns true');
	DeltaJoinTest::target_ok($node, $_, $auto{$_}, "$_: after changes") foreach sort keys %auto;

	# SET EXPRESSION of a virtual column: the recomputes' results change too
	$node->safe_psql('postgres', 'ALTER TABLE o ALTER COLUMN amt2 SET EXPRESSION AS (amt * 3)');
	DeltaJoinTest::target_ok($node, $_, $auto{$_}, "$_: after SET EXPRESSION of a virtual column")
	  foreach qw(d_agg g_group k_join);

	# ---- a temporal primary key ----

	$node->safe_psql(
		'postgres', q{
		CREATE EXTENSION btree_gist;
		CREATE TABLE room (id int, valid daterange, price int, PRIMARY KEY (id, valid WITHOUT OVERLAPS));
		INSERT INTO room VALUES (1, '[2026-01-01,2026-02-01)', 10), (1, '[2026-02-01,2026-03-01)', 20);});
	my $room = 'SELECT id, valid, price FROM room';
	like(error_of(create('room_delta', $room)),
		qr/0A000: delta view rule 1: the primary key of source "public.room" is not a btree index/,
		'a temporal primary key is refused by rule 1, not by an internal error');
	$node->safe_psql('postgres', create('room_auto', $room, 'auto'));
	is(mode_of('room_auto'), 'full recompute', 'strategy auto maintains it by full recompute');
	$node->safe_psql('postgres', q{
		UPDATE room SET price = price + 1;
		INSERT INTO room VALUES (2, '[2026-01-01,2026-04-01)', 30);});
	ok($node->safe_psql('postgres', 'SELECT delta_join.wait()') eq 't', 'wait() returns true');
	DeltaJoinTest::target_ok($node, 'room_auto', $room, 'room_auto: after changes');
}

$node->stop;
done_testing();
