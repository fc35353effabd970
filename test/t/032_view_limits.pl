# One view's options do not degrade the others (attack 18, finding 6): any
# role may make a view with the options it likes, and the worker serves
# every view of the database in the same batches, from the same slot.
#
#  1. a view with max_batch_size 1, made by an ordinary role, bounds only
#     its own part of each batch: another view's large transaction is one
#     batch that does not spill (the batch is the worker's
#     delta_join.max_batch_size), while the small view is seen applied a
#     few keys at a time;
#  2. a view held up by a lock on its target, with a lookup_timeout of 24
#     days, holds the slot back (WAL read meanwhile with no change for a
#     view does not move it past the view's keys), and goes to error once
#     it has done so for delta_join.max_retry_time (lowered to 6 s), naming
#     the setting; the slot moves on;
#  3. a full recompute with a refresh_interval of a day recomputes after
#     half of max_retry_time instead of holding the slot for a day;
#  4. a view whose apply runs long (its owner's function sleeps an hour),
#     with lookup_timeout 0 (no bound), is cut off by max_retry_time: the
#     other views go on, and it goes to error (attack 29b: before, the one
#     apply worker slept in it, every view of the database waiting).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('view_limits', conf => { log_min_messages => 'debug1' });
DeltaJoinTest::worked_example($node);
$node->safe_psql(
	'postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE SCHEMA app AUTHORIZATION alice;
	SELECT delta_join.create_view('wide', $q$ } . $DeltaJoinTest::wide_query . q{ $q$);});

# run SQL logged in as alice
sub as_alice
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql, extra_params => [ '-U', 'alice' ]);
}

as_alice(
	q{
	CREATE TABLE app.mine (id int PRIMARY KEY, v int NOT NULL);
	CREATE TABLE app.held (id int PRIMARY KEY, v int NOT NULL);
	CREATE TABLE app.ranked (id int PRIMARY KEY, v int NOT NULL);
	ALTER TABLE app.mine REPLICA IDENTITY FULL;
	ALTER TABLE app.held REPLICA IDENTITY FULL;
	CREATE INDEX ON app.mine (v);
	CREATE INDEX ON app.held (v);
	SELECT delta_join.create_view('app.tiny',
	  'SELECT v, count(*) AS n FROM app.mine GROUP BY v',
	  options => '{"max_batch_size": 1}');
	SELECT delta_join.create_view('app.pin',
	  'SELECT v, count(*) AS n FROM app.held GROUP BY v',
	  options => '{"lookup_timeout": "24d"}');
	SELECT delta_join.create_view('app.slow',
	  'SELECT id, v, rank() OVER (ORDER BY v) AS r FROM app.ranked',
	  strategy => 'auto', options => '{"refresh_interval": "1d"}');});
is( $node->safe_psql('postgres',
		"SELECT string_agg(target || ' ' || runs_as || ' ' || mode, ', ' ORDER BY target) FROM delta_join.views"),
	'app.pin alice delta, app.slow alice full recompute, app.tiny alice delta, public.wide postgres delta',
	"alice's views run as alice");

# ---- 1. a view's max_batch_size is its own ----

my $log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	'INSERT INTO orders SELECT 1 + g % 50, 1 + g % 20, g, g FROM generate_series(1001, 2000) g');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', "a transaction of 1,000 keys on another view's source is applied");
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query, 'beside a view of max_batch_size 1');
unlike(slurp_file($node->logfile, $log_offset), qr/were spilled to disk/,
	"its batch did not spill: the tiny view's max_batch_size does not bound it");

# 200 keys of the tiny view in one transaction: a reader sees the target
# fill a part at a time (one key a batch), and never all at once
$node->safe_psql(
	'postgres', q{
	CREATE FUNCTION partial_counts(want int, seconds float8) RETURNS int
	LANGUAGE plpgsql AS $f$
	DECLARE
	  deadline timestamptz := clock_timestamp() + seconds * interval '1 second';
	  seen int[] := '{}';
	  c int;
	BEGIN
	  LOOP
	    SELECT count(*) INTO c FROM app.tiny;
	    IF c > 0 AND c < want AND NOT c = ANY (seen) THEN
	      seen := seen || c;
	    END IF;
	    EXIT WHEN c = want OR clock_timestamp() > deadline;
	  END LOOP;
	  RETURN cardinality(seen);
	END $f$;});
as_alice('INSERT INTO app.mine SELECT g, g FROM generate_series(1, 200) g');
cmp_ok($node->safe_psql('postgres', 'SELECT partial_counts(200, 120)'),
	'>=', 2, 'the view of max_batch_size 1 is applied a part at a time');
is($node->safe_psql('postgres', "SELECT delta_join.wait('app.tiny', '120s')"),
	't', 'and catches up');
DeltaJoinTest::target_ok($node, 'app.tiny', 'SELECT v, count(*) AS n FROM app.mine GROUP BY v',
	'max_batch_size 1');

# ---- 2. delta_join.max_retry_time bounds a held view ----

my $locker = $node->background_psql('postgres', extra_params => [ '-U', 'alice' ]);
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE app.pin IN ACCESS EXCLUSIVE MODE');
as_alice('INSERT INTO app.held VALUES (1, 1)');
my $lsn = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT reason ~ '^retrying' FROM delta_join.status WHERE target = 'app.pin'}),
	'the held view is retried');
$node->safe_psql('postgres', 'CREATE TABLE noise (x int); INSERT INTO noise VALUES (1)');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', 'the worker has read the WAL written since');
is( $node->safe_psql(
		'postgres', qq{
		SELECT confirmed_flush_lsn < '$lsn' FROM pg_replication_slots
		WHERE slot_name LIKE 'delta_join%'}),
	't', 'the slot waits for the held view');
$node->safe_psql('postgres',
	"ALTER SYSTEM SET delta_join.max_retry_time = '6s'; SELECT pg_reload_conf()");
ok( $node->poll_query_until(
		'postgres', "SELECT state = 'error' FROM delta_join.views WHERE target = 'app.pin'"),
	'after max_retry_time it is in error, its lookup_timeout of 24 days notwithstanding');
like( $node->safe_psql('postgres',
		"SELECT last_error || ' / ' || last_error_hint FROM delta_join.status WHERE target = 'app.pin'"),
	qr/held back the replication slot for longer than delta_join\.max_retry_time \(6000 ms\).*lock timeout \/ .*delta_join\.max_retry_time/,
	'the error names the setting, and the hint says what to do');
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots
		WHERE slot_name LIKE 'delta_join%'}),
	'the slot moves on past the change');
$locker->query_safe('COMMIT');
$locker->quit;
as_alice("SELECT delta_join.refresh('app.pin')");
as_alice('INSERT INTO app.held VALUES (2, 1)');
is($node->safe_psql('postgres', "SELECT delta_join.wait('app.pin', '60s')"),
	't', 'refreshed, the view is maintained again');
DeltaJoinTest::target_ok($node, 'app.pin', 'SELECT v, count(*) AS n FROM app.held GROUP BY v',
	'refreshed after max_retry_time');

# ---- 3. a full recompute's refresh_interval is bounded too ----

my $slow = 'SELECT id, v, rank() OVER (ORDER BY v) AS r FROM app.ranked';
as_alice('INSERT INTO app.ranked VALUES (1, 10)');
is($node->safe_psql('postgres', "SELECT delta_join.wait('app.slow', '60s')"),
	't', 'the first change is recomputed at once');
as_alice('INSERT INTO app.ranked VALUES (2, 5)');
ok( $node->poll_query_until('postgres', 'SELECT count(*) = 2 FROM app.slow'),
	'the next one, before its refresh_interval of a day (half of max_retry_time)');
DeltaJoinTest::target_ok($node, 'app.slow', $slow, 'a refresh_interval longer than max_retry_time');
is( $node->safe_psql('postgres',
		"SELECT string_agg(target || ' ' || state, ', ' ORDER BY target) FROM delta_join.views WHERE target::text <> 'app.pin'"),
	'app.slow active, app.tiny active, public.wide active', 'the other views are active');

# ---- 4. max_retry_time bounds one long apply ----

as_alice(
	q{
	CREATE FUNCTION app.slow_f(x int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$
	BEGIN
	  IF x = 999 THEN PERFORM pg_sleep(3600); END IF;
	  RETURN x;
	END $f$;
	CREATE TABLE app.sleepy (id int PRIMARY KEY, v int NOT NULL);
	SELECT delta_join.create_view('app.sleepy_v',
	  'SELECT id, app.slow_f(v) AS w FROM app.sleepy',
	  options => '{"lookup_timeout": 0}');
	INSERT INTO app.sleepy VALUES (1, 999);});
$node->safe_psql('postgres', 'INSERT INTO orders (merchant_id, item_id, order_id, amount) VALUES (1, 1, 9001, 1)');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', "a view that sleeps in its owner's function does not hold up the others");
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query, 'beside a sleeping view');
ok( $node->poll_query_until(
		'postgres', "SELECT state = 'error' FROM delta_join.views WHERE target = 'app.sleepy_v'"),
	'the sleeping view goes to error, its lookup_timeout of 0 notwithstanding');
like( $node->safe_psql('postgres',
		"SELECT last_error FROM delta_join.status WHERE target = 'app.sleepy_v'"),
	qr/statement timeout/, 'cut off by the statement timeout max_retry_time set');

$node->stop;
done_testing();
