# Differential test of outer joins on every path (issue 18, "Exact on
# every path"; DESIGN.md §2 "Outer delta joins", §6.1): chains of 3 and 4
# tables, LEFT, RIGHT and FULL, in upsert and retract mode; filters that
# keep the NULLs of a nullable side (refused by the delta paths, so
# strategy auto maintains them by full recompute); an aggregate grouped by
# a nullable side's column (a target keyed on columns that can be NULL);
# and TRUNCATE of every source, nullable sides included.
#
# Four tables, each joined to the next on a column outside its primary key
# (ca.k = cb.k, cb.k2 = cc.k2, cc.id = cd.cid), and by a key the join ties to
# another source's column (cb.id = ca.bid, cd.id = cc.id: those sources'
# keys are then not in the target's key, so a row and its null extension
# share a target key).  Views, in upsert (_up) and retract (_rt) mode:
#
#   l3    ca LEFT JOIN cb ON k LEFT JOIN cc ON k2
#   l3r   ca LEFT JOIN cb ON cb.id = ca.bid LEFT JOIN cc ON k2      key (a_id, c_id)
#   l3p   the same without cb's key in the select list (upsert mode only)
#   l2p   ca LEFT JOIN cb ON cb.id = ca.bid, cb's key not selected (upsert only)
#   l4    l3 LEFT JOIN cd ON cd.cid = cc.id
#   l4r   l3r LEFT JOIN cd ON cd.id = cc.id                          key (a_id, c_id)
#   f3    ca FULL JOIN cb ON k FULL JOIN cc ON k2
#   mix   ca RIGHT JOIN cb ON k LEFT JOIN cc ON k2 FULL JOIN cd ON cd.cid = cc.id
#   nest  ca LEFT JOIN (cb FULL JOIN cc ON k2) ON k
#
# and l3 and f3 under strategy none (keyed recompute); under strategy auto
# (full recompute, exact): an anti-join (WHERE cb.id IS NULL), a coalesce
# that is true for NULL over a chain, IS NULL on either side of a FULL
# JOIN, an outer join's ON that tests the side below for NULL, and an
# aggregate grouped by cb.id (NOT NULL in cb, not in the join).
#
# Concurrent pgbench clients write at a bounded rate, so that the worker
# applies while they go on: upserts, updates of join columns, deletes,
# TRUNCATE of each table, and multi-table transactions; then a burst
# without TRUNCATE; then each table is truncated in turn, with no write
# after it (cd, cc, cb, then ca).  After each step and
# delta_join.wait(): retract mode, keyed and full recompute equal their
# query; upsert mode (DeltaJoinTest::target_ok with sub_rows):
# every row of the query is in the target, every extra row is residual
# (its combination of source keys is gone from the query), and no row is a
# sub-row of another (no null-extended row beside the rows that replace
# it); every view is active.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my @seeds = (54, 5454);
my $clients = 4;
my $transactions = 600;    # per client, each burst
my $rate = 400;            # transactions per second, all clients

my $node = DeltaJoinTest::new_node('main');

# name => [ query (tables in schema S), combo columns, modes ]
my $l3 = q{SELECT a.id AS a_id, b.id AS b_id, c.id AS c_id, a.k, b.k2, c.v
  FROM S.ca a LEFT JOIN S.cb b ON b.k = a.k LEFT JOIN S.cc c ON c.k2 = b.k2};
my $f3 = q{SELECT a.id AS a_id, b.id AS b_id, c.id AS c_id, a.k, b.k AS b_k, b.k2, c.k2 AS c_k2, c.v
  FROM S.ca a FULL JOIN S.cb b ON b.k = a.k FULL JOIN S.cc c ON c.k2 = b.k2};
my %views = (
	l3 => [ $l3, [qw(a_id b_id c_id)], [qw(up rt none)] ],
	l3r => [
		q{SELECT a.id AS a_id, a.bid, b.id AS b_id, b.k2, c.id AS c_id, c.v
  FROM S.ca a LEFT JOIN S.cb b ON b.id = a.bid LEFT JOIN S.cc c ON c.k2 = b.k2},
		[qw(a_id b_id c_id)], [qw(up rt)]
	],
	l3p => [
		q{SELECT a.id AS a_id, a.bid, c.id AS c_id, c.v
  FROM S.ca a LEFT JOIN S.cb b ON b.id = a.bid LEFT JOIN S.cc c ON c.k2 = b.k2},
		[qw(a_id c_id)], [qw(up)]
	],
	l2p => [
		q{SELECT a.id AS a_id, a.bid, b.k AS b_k, b.k2
  FROM S.ca a LEFT JOIN S.cb b ON b.id = a.bid},
		[qw(a_id)], [qw(up)]
	],
	l4 => [
		q{SELECT a.id AS a_id, b.id AS b_id, c.id AS c_id, d.id AS d_id, c.v, d.w
  FROM S.ca a LEFT JOIN S.cb b ON b.k = a.k LEFT JOIN S.cc c ON c.k2 = b.k2
  LEFT JOIN S.cd d ON d.cid = c.id},
		[qw(a_id b_id c_id d_id)], [qw(up rt)]
	],
	l4r => [
		q{SELECT a.id AS a_id, a.bid, b.id AS b_id, c.id AS c_id, d.id AS d_id, d.w
  FROM S.ca a LEFT JOIN S.cb b ON b.id = a.bid LEFT JOIN S.cc c ON c.k2 = b.k2
  LEFT JOIN S.cd d ON d.id = c.id},
		[qw(a_id b_id c_id d_id)], [qw(up rt)]
	],
	f3 => [ $f3, [qw(a_id b_id c_id)], [qw(up rt none)] ],
	mix => [
		q{SELECT a.id AS a_id, b.id AS b_id, c.id AS c_id, d.id AS d_id, b.k2, c.v, d.cid
  FROM S.ca a RIGHT JOIN S.cb b ON b.k = a.k LEFT JOIN S.cc c ON c.k2 = b.k2
  FULL JOIN S.cd d ON d.cid = c.id},
		[qw(a_id b_id c_id d_id)], [qw(up rt)]
	],
	nest => [
		q{SELECT a.id AS a_id, b.id AS b_id, c.id AS c_id, a.k, b.k2, c.v
  FROM S.ca a LEFT JOIN (S.cb b FULL JOIN S.cc c ON c.k2 = b.k2) ON b.k = a.k},
		[qw(a_id b_id c_id)], [qw(up rt)]
	],
	anti => [
		q{SELECT a.id AS a_id, a.k, b.id AS b_id FROM S.ca a LEFT JOIN S.cb b ON b.k = a.k WHERE b.id IS NULL},
		undef, [qw(auto)]
	],
	nvl => [
		q{SELECT a.id AS a_id, b.id AS b_id, c.id AS c_id, c.v
  FROM S.ca a LEFT JOIN S.cb b ON b.k = a.k LEFT JOIN S.cc c ON c.k2 = b.k2
  WHERE coalesce(c.v, 'none') <> 'v1'},
		undef, [qw(auto)]
	],
	lonely => [
		q{SELECT a.id AS a_id, b.id AS b_id, a.k, b.k AS b_k
  FROM S.ca a FULL JOIN S.cb b ON b.k = a.k WHERE a.id IS NULL OR b.id IS NULL},
		undef, [qw(auto)]
	],
	upper => [
		q{SELECT a.id AS a_id, b.id AS b_id, c.id AS c_id
  FROM S.ca a LEFT JOIN S.cb b ON b.k = a.k LEFT JOIN S.cc c ON c.k2 = a.k AND b.id IS NULL},
		undef, [qw(auto)]
	],
	agg => [
		q{SELECT b.id AS b_id, count(*) AS n, count(c.id) AS c_n
  FROM S.ca a LEFT JOIN S.cb b ON b.k = a.k LEFT JOIN S.cc c ON c.k2 = b.k2 GROUP BY b.id},
		undef, [qw(auto)]
	]);

# every view of schema $s: target => [ query, combo (upsert mode) or undef ]
sub views_of
{
	my ($s) = @_;
	my %v;
	foreach my $name (sort keys %views)
	{
		my ($query, $combo, $modes) = @{ $views{$name} };
		(my $q = $query) =~ s/S\./$s./g;
		$v{"$s.${name}_$_"} = [ $q, $_ eq 'up' ? $combo : undef, $_ ] foreach @$modes;
	}
	return \%v;
}

sub create_schema
{
	my ($s, $seed) = @_;
	$node->safe_psql(
		'postgres', qq{
		SELECT setseed(1.0 / $seed);
		CREATE SCHEMA $s;
		CREATE TABLE $s.ca (id int PRIMARY KEY, k int, bid int);
		CREATE INDEX ON $s.ca (k);
		CREATE INDEX ON $s.ca (bid);
		CREATE TABLE $s.cb (id int PRIMARY KEY, k int, k2 int);
		CREATE INDEX ON $s.cb (k);
		CREATE INDEX ON $s.cb (k2);
		CREATE TABLE $s.cc (id int PRIMARY KEY, k2 int, v text);
		CREATE INDEX ON $s.cc (k2);
		CREATE TABLE $s.cd (id int PRIMARY KEY, cid int, w int);
		CREATE INDEX ON $s.cd (cid);
		INSERT INTO $s.ca SELECT g, (random() * 14)::int, (random() * 24)::int
		  FROM generate_series(0, 24) g WHERE random() < 0.7;
		INSERT INTO $s.cb SELECT g, (random() * 14)::int, (random() * 14)::int
		  FROM generate_series(0, 24) g WHERE random() < 0.5;
		INSERT INTO $s.cc SELECT g, (random() * 14)::int, 'v' || (random() * 3)::int
		  FROM generate_series(0, 24) g WHERE random() < 0.5;
		INSERT INTO $s.cd SELECT g, (random() * 24)::int, g
		  FROM generate_series(0, 24) g WHERE random() < 0.5;});
}

# pgbench scripts: per table an upsert, updates of each join column, a
# delete; a TRUNCATE of a random table; a transaction over all four
sub scripts
{
	my ($s, $with_truncate) = @_;
	my $pick = q{\set id random(0, 24)
\set id2 random(0, 24)
\set k random(0, 14)
\set k2 random(0, 14)
\set n random(0, 3)
\set op random(0, 9)
\set t random(0, 3)
};
	my %sql = (
		ca => qq{\\if :op < 4
INSERT INTO $s.ca VALUES (:id, :k, :id2)
  ON CONFLICT (id) DO UPDATE SET k = excluded.k, bid = excluded.bid;
\\elif :op < 6
UPDATE $s.ca SET k = :k WHERE id = :id;
\\elif :op < 8
UPDATE $s.ca SET bid = :id2 WHERE id = :id;
\\else
DELETE FROM $s.ca WHERE id = :id;
\\endif
},
		cb => qq{\\if :op < 4
INSERT INTO $s.cb VALUES (:id, :k, :k2)
  ON CONFLICT (id) DO UPDATE SET k = excluded.k, k2 = excluded.k2;
\\elif :op < 6
UPDATE $s.cb SET k = :k WHERE id = :id;
\\elif :op < 7
UPDATE $s.cb SET k2 = :k2 WHERE id = :id;
\\else
DELETE FROM $s.cb WHERE id = :id;
\\endif
},
		cc => qq{\\if :op < 4
INSERT INTO $s.cc VALUES (:id, :k2, 'v' || :n)
  ON CONFLICT (id) DO UPDATE SET k2 = excluded.k2, v = excluded.v;
\\elif :op < 6
UPDATE $s.cc SET k2 = :k2 WHERE id = :id;
\\elif :op < 7
UPDATE $s.cc SET v = CASE WHEN :n = 0 THEN NULL ELSE 'v' || :n END WHERE id = :id;
\\else
DELETE FROM $s.cc WHERE id = :id;
\\endif
},
		cd => qq{\\if :op < 5
INSERT INTO $s.cd VALUES (:id, :id2, :k)
  ON CONFLICT (id) DO UPDATE SET cid = excluded.cid, w = excluded.w;
\\elif :op < 7
UPDATE $s.cd SET cid = :id2 WHERE id = :id;
\\else
DELETE FROM $s.cd WHERE id = :id;
\\endif
},
		transaction => qq{BEGIN;
UPDATE $s.cb SET k = :k WHERE id = :id;
INSERT INTO $s.cc VALUES (:id2, :k2, 'tx') ON CONFLICT (id) DO UPDATE SET k2 = excluded.k2;
DELETE FROM $s.ca WHERE id = :id2;
INSERT INTO $s.cd VALUES (:id, :id2, 0) ON CONFLICT (id) DO UPDATE SET cid = excluded.cid;
COMMIT;
});
	my %scripts = map { ($_ => [ 4, $pick . $sql{$_} ]) } keys %sql;
	$scripts{transaction}[0] = 2;
	$scripts{truncate} = [
		1, $pick . qq{\\if :t = 0
TRUNCATE $s.ca;
\\elif :t = 1
TRUNCATE $s.cb;
\\elif :t = 2
TRUNCATE $s.cc;
\\else
TRUNCATE $s.cd;
\\endif
}
	] if $with_truncate;
	return DeltaJoinWorkload::write_scripts(%scripts);
}

sub check_views
{
	my ($v, $name) = @_;
	ok(DeltaJoinWorkload::wait_views($node, undef, '180s'),
		"$name: wait() returns true");
	my @targets = sort keys %$v;
	DeltaJoinTest::targets_ok(
		$node, $name,
		[
			map {
				my ($q, $combo) = @{ $v->{$_} };
				defined $combo
				  ? [ $_, $q, mode => 'upsert', key => $combo, sub_rows => $combo ]
				  : [ $_, $q ]
			} @targets
		]);
	# every view's state, in one query
	my %state = map { split /\|/, $_, 2 } split /\n/,
	  $node->safe_psql('postgres',
		"SELECT target, state || coalesce(': ' || last_error, '') FROM delta_join.status");
	is($state{$_}, 'active', "$name: $_ is active") foreach @targets;
}

# the seeds this major runs (DeltaJoinTest::seeds); what follows the loop
# uses the first or the last of them
my @run = DeltaJoinTest::seeds($node, @seeds);
foreach my $seed (@run)
{
	# set-based apply for every seed but the second, generic plans for that one
	DeltaJoinWorkload::set_based_apply($node, $seed != $seeds[1]);
	my $s = "c$seed";
	create_schema($s, $seed);
	my $v = views_of($s);
	my $create = '';
	foreach my $t (sort keys %$v)
	{
		my ($q, undef, $mode) = @{ $v->{$t} };
		my ($strategy, $options) =
			$mode eq 'up' ? ('eventual', '{}')
		  : $mode eq 'rt' ? ('eventual', '{"retract": true}')
		  : ($mode, '{"refresh_interval": "50ms"}');
		$create .=
		  "SELECT delta_join.create_view('$t', \$q\$ $q \$q\$, strategy => '$strategy', options => '$options');\n";
	}
	$node->safe_psql('postgres', $create);

	# the paths the views took
	is( $node->safe_psql(
			'postgres', qq{
			SELECT string_agg(DISTINCT mode, ', ' ORDER BY mode) FILTER (WHERE target LIKE '%\\_auto')
			       || ' / ' || string_agg(DISTINCT mode, ', ' ORDER BY mode) FILTER (WHERE target LIKE '%\\_none')
			FROM delta_join.views WHERE target LIKE '$s.%'}),
		'full recompute / keyed recompute',
		"seed $seed: the filters that keep NULLs are fully recomputed, strategy none is keyed");
	is( $node->safe_psql(
			'postgres', qq{
			SELECT count(*) FROM pg_constraint
			WHERE conrelid = '$s.agg_auto'::regclass AND contype = 'u'}),
		'1',
		"seed $seed: the aggregate grouped by a nullable column has a UNIQUE NULLS NOT DISTINCT key");

	DeltaJoinTest::targets_ok($node, "seed $seed: after backfill",
		[ map { [ $_, $v->{$_}[0] ] } sort keys %$v ]);

	DeltaJoinWorkload::pgbench_ok(
		$node, scripts($s, 1), "seed $seed: random writes with TRUNCATE",
		seed => $seed,
		clients => $clients,
		rate => $rate,
		transactions => $transactions);
	check_views($v, "seed $seed");

	# a burst without TRUNCATE fills the tables again: the queries then have
	# null-extended and joined rows, at every join of the chains
	DeltaJoinWorkload::pgbench_ok(
		$node, scripts($s, 0), "seed $seed: random writes",
		seed => $seed + 1,
		clients => $clients,
		rate => $rate,
		transactions => $transactions);
	check_views($v, "seed $seed, second burst");
	my $kinds = $node->safe_psql(
		'postgres', qq{
		SELECT count(*) FILTER (WHERE b_id IS NULL) > 0, count(*) FILTER (WHERE b_id IS NOT NULL AND c_id IS NULL) > 0,
		       count(*) FILTER (WHERE c_id IS NOT NULL) > 0
		FROM $s.l3_rt});
	is($kinds, 't|t|t', "seed $seed: l3 has rows null-extended at each join, and joined rows");

	# each table truncated in turn, with no write after it to mend what a
	# TRUNCATE left wrong
	foreach my $table (qw(cd cc cb ca))
	{
		$node->safe_psql('postgres', "TRUNCATE $s.$table");
		check_views($v, "seed $seed, $table truncated");
	}

	$node->safe_psql('postgres',
		join('', map { "SELECT delta_join.drop_view('$_');\n" } sort keys %$v));
}

$node->stop;
done_testing();
