# The lookup cache of a delta join is kept per source and index; walks from
# different sources may look the same index up with values of different
# types -- c.k text bound by a.k (text) from one walk and by b.k (name)
# from another, through text_ops' cross-type equality.  One cache for both
# read the second walk's values with the first one's type: a name taken
# for a text varlena put the view in error ("compressed pglz data is
# corrupt") or worse, a text taken for a name compared 64 bytes of it, and
# a timestamp looked up in the cache of a timestamptz of the same image
# found the rows of that timestamptz instead of its own (which the
# timestamp equals only in UTC).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('cache_types');
# (a timestamp is the timestamptz 5 hours later; the views pin the zone)
$node->safe_psql('postgres', q{ALTER DATABASE postgres SET TimeZone = 'America/New_York'});
$node->safe_psql(
	'postgres', q{
	CREATE TABLE c (id int PRIMARY KEY, k text, v text);
	CREATE INDEX ON c (k);
	CREATE TABLE a (id int PRIMARY KEY, k text);
	CREATE INDEX ON a (k);
	CREATE TABLE b (id int PRIMARY KEY, k name);
	CREATE INDEX ON b (k);
	CREATE TABLE times (id int PRIMARY KEY, t timestamptz, v text);
	CREATE INDEX ON times (t);
	CREATE TABLE zoned (id int PRIMARY KEY, t timestamptz);
	CREATE INDEX ON zoned (t);
	CREATE TABLE local (id int PRIMARY KEY, t timestamp);
	CREATE INDEX ON local (t);});

my %query = (
	named => 'SELECT a.id AS aid, b.id AS bid, c.id AS cid, c.v FROM a JOIN c ON a.k = c.k JOIN b ON b.k = c.k',
	by_time => 'SELECT z.id AS zid, l.id AS lid, t.id AS tid, t.v FROM zoned z JOIN times t ON z.t = t.t '
	  . 'JOIN local l ON l.t = t.t');
foreach my $view (sort keys %query)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$view', \$q\$ $query{$view} \$q\$, "
		  . q{options => '{"cache_enabled": true}')});
}
sub applied
{
	my ($name) = @_;
	is( $node->safe_psql('postgres',
			q{SELECT bool_and(delta_join.wait(target, '60s')) FROM delta_join.views}),
		't', $name);
}

$node->safe_psql(
	'postgres', q{
	INSERT INTO c VALUES (1, 'bob', 'one'), (2, 'bobby', 'two'), (3, 'alice', 'three');
	INSERT INTO times VALUES (1, '2020-01-01 05:00+00', 'five'), (2, '2020-01-01 00:00+00', 'zero');});
applied('the looked-up sides are applied');

# the caches of c and days are filled with values of the first type ...
$node->safe_psql('postgres',
	q{INSERT INTO a VALUES (1, 'bob'), (2, 'alice');
	  INSERT INTO zoned VALUES (1, '2020-01-01 00:00+00'), (2, '2020-01-01 05:00+00');});
applied('the first walks are applied');

# ... and looked up with values of the other
$node->safe_psql('postgres',
	q{INSERT INTO b VALUES (1, 'bob'), (2, 'alice'), (3, 'bobby');
	  INSERT INTO local VALUES (1, '2020-01-01 00:00');});
applied('the second walks are applied');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(target || ': ' || state, ', ' ORDER BY target) FROM delta_join.status}),
	'public.by_time: active, public.named: active', 'no view is in error');
# (inserts only: no residual row)
DeltaJoinTest::target_ok($node, $_, $query{$_}, $_) foreach sort keys %query;

done_testing();
