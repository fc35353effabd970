# The join applier uses the row a key's last change in the batch left, as
# decoding kept it, instead of fetching it (issue 10).  Each case below
# builds one batch while the worker is stopped (SIGSTOP), so that every
# change of the case is decoded into the same batch, then lets the worker go
# and compares the views with their queries:
#
#  1. one key changed many times, its partner too, and a key deleted and
#     inserted again, inserted and deleted, moved to another key;
#  2. TOASTed values: a changed one (decoding holds it in the reorder
#     buffer) and an unchanged one (a pointer to the stored value);
#  3. the row type of the source changed after the rows were decoded: a
#     column's type changed by a rewrite, a column added, one dropped;
#     keys equal under their index with other bytes (numeric, a
#     case-insensitive collation);
#  4. a TRUNCATE after changes of the same source in the batch;
#  5. a partitioned source, one of its partitions with its columns in
#     another order (rows of partitions are fetched).
#
# The views are an inner join in upsert mode (every row of the query must
# be there) and the same join in retract mode (equal to its query).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('rows', conf => { 'delta_join.apply_workers' => '1' });
DeltaJoinTest::worked_example($node);
$node->safe_psql(
	'postgres', q{
	ALTER TABLE orders ADD COLUMN note int DEFAULT 7;
	CREATE TABLE docs (doc_id int PRIMARY KEY, merchant_id bigint, item_id bigint,
	                   title text, body text);
	INSERT INTO docs SELECT d, 1 + d % 3, 1 + d % 10, 'doc ' || d, repeat(md5(d::text), 10)
	  FROM generate_series(1, 50) d;
	CREATE INDEX ON docs (merchant_id, item_id);
	CREATE INDEX ON orders (merchant_id, item_id);
	CREATE TABLE events (merchant_id bigint, event_id int, item_id bigint, what text,
	                     PRIMARY KEY (merchant_id, event_id)) PARTITION BY LIST (merchant_id);
	CREATE TABLE events_1 PARTITION OF events FOR VALUES IN (1);
	CREATE TABLE events_2 PARTITION OF events FOR VALUES IN (2, 3);
	INSERT INTO events SELECT 1 + e % 3, e, 1 + e % 10, 'event ' || e
	  FROM generate_series(1, 60) e;
	CREATE TABLE events_4 (what text, item_id bigint, gone int, event_id int NOT NULL,
	                       merchant_id bigint NOT NULL);
	ALTER TABLE events_4 DROP COLUMN gone;
	ALTER TABLE events ATTACH PARTITION events_4 FOR VALUES IN (4);
	INSERT INTO events SELECT 4, e, 1 + e % 10, 'event ' || e FROM generate_series(1, 30) e;
	INSERT INTO items SELECT 4, i, 'item ' || i FROM generate_series(1, 10) i;
	CREATE INDEX ON events (merchant_id, item_id);
	CREATE TABLE scores (score_id int PRIMARY KEY, merchant_id bigint, item_id bigint,
	                     score int, label text);
	CREATE INDEX ON scores (merchant_id, item_id);
	INSERT INTO scores SELECT s, 1 + s % 3, 1 + s % 10, s, 'label ' || s
	  FROM generate_series(1, 40) s;
	CREATE TABLE amounts (id numeric PRIMARY KEY, merchant_id bigint, item_id bigint, v int);
	CREATE INDEX ON amounts (merchant_id, item_id);
	INSERT INTO amounts SELECT a, 1, 1 + a % 10, a FROM generate_series(1, 20) a;
	CREATE COLLATION nocase (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
	CREATE TABLE tags (tag text COLLATE nocase PRIMARY KEY, merchant_id bigint, item_id bigint, v int);
	CREATE INDEX ON tags (merchant_id, item_id);
	INSERT INTO tags SELECT 'tag' || t, 2, 1 + t % 10, t FROM generate_series(1, 20) t;});

my %query = (
	wide => $DeltaJoinTest::wide_query,
	wide_retract => $DeltaJoinTest::wide_query,
	docs_wide => 'SELECT d.doc_id, d.title, d.body, i.item_name FROM docs d '
	  . 'JOIN items i ON i.merchant_id = d.merchant_id AND i.item_id = d.item_id',
	docs_retract => 'SELECT d.doc_id, d.title, d.body, i.merchant_id, i.item_id, i.item_name FROM docs d '
	  . 'JOIN items i ON i.merchant_id = d.merchant_id AND i.item_id = d.item_id',
	scores_wide => 'SELECT s.score_id, s.label, i.item_name FROM scores s '
	  . 'JOIN items i ON i.merchant_id = s.merchant_id AND i.item_id = s.item_id',
	amounts_retract => 'SELECT a.id, a.v, i.merchant_id, i.item_id, i.item_name FROM amounts a '
	  . 'JOIN items i ON i.merchant_id = a.merchant_id AND i.item_id = a.item_id',
	tags_retract => 'SELECT t.tag, t.v, i.merchant_id, i.item_id, i.item_name FROM tags t '
	  . 'JOIN items i ON i.merchant_id = t.merchant_id AND i.item_id = t.item_id',
	events_wide => 'SELECT e.merchant_id, e.event_id, e.what, i.item_name FROM events e '
	  . 'JOIN items i ON i.merchant_id = e.merchant_id AND i.item_id = e.item_id');
my %retract = (wide_retract => 1, docs_retract => 1, amounts_retract => 1, tags_retract => 1);
foreach my $view (sort keys %query)
{
	my $options = $retract{$view} ? q{, options => '{"retract": true}'} : '';
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$view', \$q\$ $query{$view} \$q\$ $options)");
}

sub wait_all
{
	return $node->safe_psql('postgres',
		"SELECT bool_and(delta_join.wait(target, '60s')) FROM delta_join.views");
}

sub check_all
{
	my ($what) = @_;
	foreach my $view (sort keys %query)
	{
		DeltaJoinTest::target_ok($node, $view, $query{$view}, $what,
			mode => $retract{$view} ? 'exact' : 'upsert');
	}
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM delta_join.status WHERE state <> 'active'"),
		'0', "$what: every view is active");
}

# Run the statements as one batch: the worker is stopped meanwhile.
sub one_batch
{
	my ($what, @statements) = @_;
	is(wait_all(), 't', "$what: caught up before");
	my $pid = DeltaJoinWorkload::worker_pid($node);
	ok(DeltaJoinWorkload::stop_worker_idle($node, $pid),
		"$what: the worker is stopped while idle");
	$node->safe_psql('postgres', $_) foreach @statements;
	kill 'CONT', $pid;
	is(wait_all(), 't', "$what: caught up after");
	check_all($what);
}

check_all('after create_view');

# 1. The keys' last changes win, whatever came before them in the batch.
one_batch(
	'many changes of a key',
	'UPDATE orders SET amount = amount + 1 WHERE merchant_id = 1',
	'UPDATE orders SET amount = amount * 2 WHERE merchant_id = 1 AND order_id < 50',
	'UPDATE items SET item_name = item_name || \' v2\' WHERE merchant_id = 1',
	'UPDATE orders SET amount = -amount WHERE merchant_id = 1 AND order_id % 3 = 0',
	'DELETE FROM orders WHERE merchant_id = 2 AND order_id < 20',
	'INSERT INTO orders SELECT 2, 1 + o % 10, o, 1000 + o FROM generate_series(1, 10) o',
	'INSERT INTO orders VALUES (3, 1, 5000, 1), (3, 2, 5001, 2)',
	'DELETE FROM orders WHERE order_id IN (5000, 5001)',
	'UPDATE orders SET order_id = order_id + 10000 WHERE merchant_id = 3 AND order_id > 90',
	'UPDATE orders SET item_id = 1 + item_id % 10 WHERE merchant_id = 3 AND order_id < 10',
	'UPDATE orders SET amount = amount + 0.5 WHERE merchant_id = 3 AND order_id > 10090');

# 2. TOASTed bodies: compressed and out of line, changed and unchanged.
$node->safe_psql('postgres', 'ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL');
one_batch(
	'TOASTed values',
	q{UPDATE docs SET body = repeat(md5(doc_id::text || 'x'), 400) WHERE doc_id <= 20},
	q{UPDATE docs SET title = title || ' (edited)' WHERE doc_id <= 30},
	q{UPDATE docs SET body = repeat('a', 100000) WHERE doc_id = 40},
	q{INSERT INTO docs VALUES (100, 1, 1, 'new', repeat(md5('new'), 500))},
	q{UPDATE docs SET title = 'renamed' WHERE doc_id = 100});

# 3. The source's columns change while the batch's rows wait: the rows
# decoded before are of another row type and must not be read as rows of
# the new one: score comes before label, which the view reads.
one_batch(
	'the type of a column before a column of the view changed',
	q{UPDATE scores SET score = score + 1, label = label || ' a' WHERE score_id <= 20},
	'ALTER TABLE scores ALTER COLUMN score TYPE text USING repeat(score::text, 3)',
	q{UPDATE scores SET label = label || ' b' WHERE score_id % 2 = 0});
one_batch(
	'a column type changed by a rewrite',
	'UPDATE orders SET amount = amount + 3, note = 11 WHERE merchant_id = 2',
	'ALTER TABLE orders ALTER COLUMN note TYPE text USING note::text',
	q{UPDATE orders SET amount = amount + 1, note = 'after' WHERE merchant_id = 2 AND order_id % 2 = 0});
one_batch(
	'a column added and one dropped',
	'UPDATE orders SET amount = amount + 5 WHERE merchant_id = 1',
	q{ALTER TABLE orders ADD COLUMN extra text DEFAULT 'x'},
	'UPDATE orders SET amount = amount + 7 WHERE merchant_id = 1 AND order_id % 2 = 0',
	'ALTER TABLE orders DROP COLUMN note',
	'UPDATE orders SET amount = amount + 9 WHERE merchant_id = 1 AND order_id % 3 = 0');
one_batch(
	'a column type changed, no other change after it',
	'UPDATE orders SET amount = amount - 1 WHERE merchant_id = 3',
	q{ALTER TABLE orders ALTER COLUMN extra TYPE varchar(20)},
	q{ALTER TABLE orders ALTER COLUMN extra DROP DEFAULT},
	q{ALTER TABLE orders ALTER COLUMN extra TYPE int USING length(extra)});

# 3b. Keys that are equal with other bytes: numeric 1.0 and 1.00, text
# under a case-insensitive collation.  Each is a dirty key of its own, with
# the row as of another change: the last of them, deleting the row of the
# other bytes, must not delete the row in the target.
one_batch(
	'equal keys with other bytes',
	'UPDATE amounts SET id = 1.00 WHERE id = 1.0',
	'UPDATE amounts SET id = 1.0 WHERE id = 1.00',
	'DELETE FROM amounts WHERE id = 1.0',
	'INSERT INTO amounts VALUES (1.00, 1, 2, 11)',
	'DELETE FROM amounts WHERE id = 2',
	'INSERT INTO amounts VALUES (2.000, 1, 3, 12)',
	'UPDATE amounts SET v = v + 1 WHERE id = 2.0',
	q{UPDATE tags SET tag = 'TAG1' WHERE tag = 'tag1'},
	q{DELETE FROM tags WHERE tag = 'Tag1'},
	q{INSERT INTO tags VALUES ('tAg1', 2, 4, 99)},
	q{DELETE FROM tags WHERE tag = 'tag2'},
	q{INSERT INTO tags VALUES ('TAG2', 2, 5, 98)});
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM amounts_retract WHERE id IN (1, 2)} . ' UNION ALL '
		  . q{SELECT count(*) FROM tags_retract WHERE tag IN ('tag1', 'tag2')}),
	"2\n2", 'equal keys with other bytes: their rows are in the targets');

# 4. A TRUNCATE drops the rows the batch had decoded before it.
one_batch(
	'TRUNCATE after changes',
	'UPDATE docs SET title = title || \'!\' WHERE doc_id < 10',
	'INSERT INTO docs VALUES (200, 2, 2, \'gone soon\', \'b\')',
	'TRUNCATE docs',
	q{INSERT INTO docs VALUES (1, 1, 1, 'back', 'c')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM docs_wide WHERE title LIKE '%!' OR doc_id = 200}),
	'0', 'TRUNCATE after changes: no row the TRUNCATE removed is written after it');

# 5. Partitions.
one_batch(
	'a partitioned source',
	q{UPDATE events SET what = what || ' changed' WHERE event_id % 4 = 0},
	'DELETE FROM events WHERE event_id % 7 = 0',
	q{INSERT INTO events VALUES (1, 1000, 3, 'new one')},
	q{UPDATE events SET merchant_id = 2 WHERE event_id = 1000},
	q{UPDATE events SET what = what || ' in 4' WHERE merchant_id = 4 AND event_id < 20},
	q{UPDATE events SET merchant_id = 4 WHERE event_id = 1000});

my $log = slurp_file($node->logfile);
# (but not the autovacuum launcher's warning, which a loaded machine makes)
my @bad = grep { !/autovacuum worker took too long to start/ }
  $log =~ /^.*(?:ERROR|WARNING|PANIC|FATAL|TRAP).*$/mg;
is(scalar(@bad), 0, 'the server log has no errors or warnings')
  or diag(join("\n", @bad[0 .. ($#bad < 9 ? $#bad : 9)]));

$node->stop;
done_testing();
