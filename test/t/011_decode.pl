# What decoding captures.
#
# Dirty keys come from the new tuple and, when it is logged, the old one (a
# row moving between groups recomputes both groups); changes of a
# partitioned source arrive on its leaf partitions, including a partition
# attached after the view was created, and count for the root; TRUNCATE
# reaches an aggregate; a transaction's many changes of one row make one
# dirty key; changes made after create_view in its own transaction count;
# compressed (TOASTed) key values are captured whole; and the worker's own
# writes to a target are decoded, so a view over another view's target
# follows it; a delete whose old key is not logged is reported.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('decode');


sub wait_all
{
	return $node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')");
}

sub keys_applied
{
	my ($target) = @_;
	return $node->safe_psql('postgres',
		"SELECT keys_applied FROM delta_join.status WHERE target = '$target'");
}

# ---- a partitioned source, and an aggregate over it ----

my $events_query = q{
	SELECT e.tenant_id, e.event_id, t.tenant_name, e.payload
	FROM events e JOIN tenants t ON e.tenant_id = t.tenant_id};
my $summary_query = q{
	SELECT tenant_id, count(*) AS events, max(payload) AS last_payload
	FROM events GROUP BY tenant_id};

$node->safe_psql(
	'postgres', qq{
	CREATE TABLE tenants (tenant_id int PRIMARY KEY, tenant_name text);
	CREATE TABLE events (tenant_id int, event_id bigint, payload text,
						 PRIMARY KEY (tenant_id, event_id))
	  PARTITION BY LIST (tenant_id);
	CREATE TABLE events_1 PARTITION OF events FOR VALUES IN (1);
	CREATE TABLE events_2 PARTITION OF events FOR VALUES IN (2);
	CREATE TABLE events_other PARTITION OF events DEFAULT;
	INSERT INTO tenants SELECT t, 'tenant ' || t FROM generate_series(1, 9) t;
	INSERT INTO events SELECT 1 + e % 3, e, 'p' || e FROM generate_series(1, 30) e;
	SELECT delta_join.create_view('tenant_events', \$\$ $events_query \$\$);
	SELECT delta_join.create_view('tenant_summary', \$\$ $summary_query \$\$);
});

$node->safe_psql(
	'postgres', q{
	INSERT INTO events VALUES (1, 100, 'x'), (2, 100, 'y'), (3, 100, 'z');
	UPDATE events SET payload = 'changed' WHERE event_id % 4 = 0;
	UPDATE tenants SET tenant_name = 'renamed' WHERE tenant_id = 2;
});
is(wait_all(), 't', 'changes of leaf partitions are applied');
DeltaJoinTest::target_ok($node, 'tenant_events', $events_query,
	'changes of leaf partitions, the join');
DeltaJoinTest::target_ok($node, 'tenant_summary', $summary_query,
	'changes of leaf partitions, the aggregate');

# a partition attached after the views were created
$node->safe_psql(
	'postgres', q{
	CREATE TABLE events_5 (LIKE events INCLUDING ALL);
	INSERT INTO events_5 VALUES (5, 1, 'before attach');
	ALTER TABLE events DETACH PARTITION events_other;
	ALTER TABLE events ATTACH PARTITION events_5 FOR VALUES IN (5);
	ALTER TABLE events ATTACH PARTITION events_other DEFAULT;
	INSERT INTO events VALUES (5, 2, 'after attach');
	UPDATE events_5 SET payload = 'updated in the leaf' WHERE event_id = 1;
});
is(wait_all(), 't', 'changes of an attached partition are applied');
is( $node->safe_psql(
		'postgres', q{SELECT string_agg(payload, ',' ORDER BY event_id)
			FROM tenant_events WHERE tenant_id = 5}),
	'updated in the leaf,after attach',
	'the attached partition feeds the view as part of its root');

# ---- old keys: a row that moves between groups, and deletes ----

$node->safe_psql(
	'postgres', q{
	UPDATE events SET tenant_id = 2, event_id = 101 WHERE tenant_id = 1 AND event_id = 100;
	DELETE FROM events WHERE tenant_id = 3;
});
is(wait_all(), 't', 'moves and deletes are applied');
DeltaJoinTest::target_ok($node, 'tenant_summary', $summary_query,
	'the old group of a moved row recomputed, a group whose rows are gone dropped');
is($node->safe_psql('postgres', 'SELECT count(*) FROM tenant_summary WHERE tenant_id = 3'),
	'0', 'the emptied group is deleted');

# ---- one transaction changing one row many times: one dirty key ----

my $before = keys_applied('public.tenant_events');
$node->safe_psql(
	'postgres', q{
	DO $$
	BEGIN
		FOR i IN 1..500 LOOP
			UPDATE events SET payload = 'round ' || i
			 WHERE tenant_id = 2 AND event_id = 1;
		END LOOP;
	END $$;
});
is(wait_all(), 't', 'repeated updates are applied');
is(keys_applied('public.tenant_events') - $before,
	1, '500 changes of one row in one transaction make one dirty key');
is( $node->safe_psql(
		'postgres', 'SELECT payload FROM tenant_events WHERE tenant_id = 2 AND event_id = 1'),
	'round 500', 'and the last value is the one applied');

# ---- TRUNCATE ----

$node->safe_psql('postgres', 'TRUNCATE events');
is(wait_all(), 't', 'TRUNCATE of the partitioned source is applied');
is($node->safe_psql('postgres', 'SELECT count(*) FROM tenant_summary'),
	'0', 'the aggregate over a truncated source is empty');

# ---- changes after create_view in its own transaction ----

$node->safe_psql(
	'postgres', q{
	CREATE TABLE docs (doc_key text PRIMARY KEY, body text);
	CREATE TABLE doc_tags (doc_key text, tag text, PRIMARY KEY (doc_key, tag));
	INSERT INTO docs VALUES ('a', 'first');
	INSERT INTO doc_tags VALUES ('a', 't1');
});
my $docs_query = q{
	SELECT t.doc_key, t.tag, d.body
	FROM doc_tags t JOIN docs d ON t.doc_key = d.doc_key};
$node->safe_psql(
	'postgres', qq{
	BEGIN;
	SELECT delta_join.create_view('tagged_docs', \$\$ $docs_query \$\$);
	INSERT INTO docs VALUES ('b', 'second');
	INSERT INTO doc_tags VALUES ('b', 't2');
	COMMIT;
});
is(wait_all(), 't', 'the transaction that created a view is decoded');
DeltaJoinTest::target_ok($node, 'tagged_docs', $docs_query,
	'changes made after create_view in its transaction');

# ---- a compressed key value ----

$node->safe_psql(
	'postgres', q{
	INSERT INTO docs VALUES (repeat('long key ', 400), 'big');
	INSERT INTO doc_tags VALUES (repeat('long key ', 400), 't3');
});
is(wait_all(), 't', 'rows with a long key are applied');
$node->safe_psql('postgres',
	q{UPDATE docs SET body = 'big, updated' WHERE doc_key = repeat('long key ', 400)});
is(wait_all(), 't', 'an update of a row with a long key is applied');
DeltaJoinTest::target_ok($node, 'tagged_docs', $docs_query,
	'a long key captured whole');

# ---- the worker's own writes: a view over another view's target ----

$node->safe_psql(
	'postgres', q{
	SELECT delta_join.create_view('tag_counts', $$
		SELECT doc_key, count(*) AS tags FROM tagged_docs GROUP BY doc_key $$);
	INSERT INTO doc_tags VALUES ('a', 't4'), ('a', 't5');
});
ok( $node->poll_query_until(
		'postgres', "SELECT tags FROM tag_counts WHERE doc_key = 'a'", '3'),
	"a view over another view's target follows the worker's writes");

# ---- a delete that logs no old key is reported, not skipped silently ----

$node->safe_psql(
	'postgres', q{
	ALTER TABLE doc_tags REPLICA IDENTITY NOTHING;
	DELETE FROM doc_tags WHERE tag = 't1';
});
is(wait_all(), 't', 'a delete without replica identity is decoded');
ok( $node->log_contains(
		qr/a delete from "doc_tags" could not be captured because the table logs no replica identity/),
	'and reported in the server log');

# ...but not for a table whose views are recomputed whole: they need no
# row of the change
$node->safe_psql(
	'postgres', q{
	CREATE TABLE lines (n int, body text);
	ALTER TABLE lines REPLICA IDENTITY NOTHING;
	INSERT INTO lines VALUES (1, 'one'), (2, 'two'), (3, 'three');
	SELECT delta_join.create_view('line_pairs', $$
		SELECT DISTINCT a.body AS lo, b.body AS hi FROM lines AS a JOIN lines AS b ON a.n < b.n $$,
		strategy => 'auto', options => '{"refresh_interval": "0s"}');
});
is($node->safe_psql('postgres', "SELECT mode FROM delta_join.status WHERE target = 'public.line_pairs'"),
	'full recompute', 'a non-equi join is recomputed whole');
$node->safe_psql('postgres', q{DELETE FROM lines WHERE n = 1});
is(wait_all(), 't', 'a delete without replica identity under a full recompute is decoded');
DeltaJoinTest::target_ok($node, 'line_pairs',
	'SELECT DISTINCT a.body AS lo, b.body AS hi FROM lines AS a JOIN lines AS b ON a.n < b.n',
	'the view recomputed whole lost nothing');
ok(!$node->log_contains(qr/a delete from "lines" could not be captured/),
	'and no warning that the delete could not be captured');

$node->stop;
done_testing();
