# A view that cannot be applied does not hold up the others.
#
# When the target of one view rejects a row (here through a CHECK constraint
# its owner added), that view goes to state 'error' with the message, the
# time and the LSN from which it is stale in delta_join.status; wait() on it
# returns false at once, and wait() on every view returns false once the
# healthy views are fresh.  The other view of the same sources keeps being
# applied, and the slot keeps moving, so no WAL is retained for the broken
# view.  delta_join.refresh() rebuilds it and maintenance resumes.  A view
# whose changes cannot even be captured (a key column of its source was
# renamed) goes to error too.  An internal error (XX000) is tried again,
# and puts the view in error only when it comes back try after try.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('view_error');

my $wide_query = $DeltaJoinTest::wide_query;
my $summary_query = $DeltaJoinTest::summary_query;

DeltaJoinTest::worked_example($node, items => 5, orders => 50);
$node->safe_psql(
	'postgres', qq{
	SELECT delta_join.create_view('wide', \$\$ $wide_query \$\$);
	SELECT delta_join.create_view('summary', \$\$ $summary_query \$\$);
	-- the owner of the wide table adds a rule the view's query does not know
	ALTER TABLE wide ADD CONSTRAINT small_amounts CHECK (amount < 1000);
});

# ---- one view fails, the other goes on ----

$node->safe_psql('postgres',
	'INSERT INTO orders VALUES (1, 1, 500, 5000), (2, 2, 501, 10)');

is($node->safe_psql('postgres', "SELECT delta_join.wait('summary', '60s')"),
	't', 'the healthy view is applied');
DeltaJoinTest::target_ok($node, 'summary', $summary_query,
	'the healthy view');

ok( $node->poll_query_until(
		'postgres', "SELECT state = 'error' FROM delta_join.views WHERE target = 'public.wide'"),
	'the view whose target rejects a row is in error');
is( $node->safe_psql(
		'postgres', q{
		SELECT last_error ~ 'small_amounts', last_error_time IS NOT NULL,
			   stale_since_lsn IS NOT NULL, lag_bytes IS NULL
		FROM delta_join.status WHERE target = 'public.wide'}),
	't|t|t|t',
	'status shows the error, its time, and from where the view is stale');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	'f', 'wait() on the view in error returns false');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"),
	'f', 'wait() on all views returns false while one is in error');
ok($node->log_contains(qr/delta view "public.wide" is in error and no longer maintained/),
	'the server log says which view stopped');

# later changes: the healthy view follows, the broken one is left alone;
# wait() on every view waits for the healthy one before it says false
$node->safe_psql('postgres', q{
	UPDATE orders SET amount = amount + 1 WHERE merchant_id = 3;
	UPDATE items SET item_name = 'renamed' WHERE item_id = 2;
});
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"),
	'f', 'wait() on all views returns false, one being in error');
DeltaJoinTest::target_ok($node, 'summary', $summary_query,
	'the healthy view is fresh once wait() on all views returned');

# ... and does not return before it while the healthy view is held up
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE summary IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE merchant_id = 3');
my $started = time();
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '3s')"),
	'f', 'wait() on all views, the healthy one held up by a lock, returns false');
cmp_ok(time() - $started, '>=', 2,
	'... only after its timeout: it waited for the healthy view');
$locker->query_safe('COMMIT');
$locker->quit;
is($node->safe_psql('postgres', "SELECT delta_join.wait('summary', '60s')"),
	't', 'the healthy view keeps being applied');
DeltaJoinTest::target_ok($node, 'summary', $summary_query,
	'the healthy view, after later changes');
is($node->safe_psql('postgres', "SELECT count(*) FROM wide WHERE item_name = 'renamed'"),
	'0', 'the view in error is not changed');

# the slot moves on: the broken view retains no WAL
my $lsn = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT confirmed_flush_lsn >= '$lsn'
		FROM pg_replication_slots WHERE slot_name LIKE 'delta_join_%'}),
	'the slot is confirmed past the changes the broken view missed');

# ---- refresh() brings it back ----

$node->safe_psql('postgres', q{
	DELETE FROM orders WHERE order_id = 500;
	SELECT delta_join.refresh('wide');
});
is($node->safe_psql('postgres', "SELECT state FROM delta_join.views WHERE target = 'public.wide'"),
	'active', 'refresh() makes the view active again');
DeltaJoinTest::target_ok($node, 'wide', $wide_query,
	'refresh() rebuilt the target');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', 'wait() right after refresh() returns true');

$node->safe_psql('postgres', q{
	INSERT INTO orders VALUES (3, 3, 600, 7);
	UPDATE items SET item_name = 'renamed again' WHERE item_id = 4;
});
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', 'the refreshed view is maintained again');
DeltaJoinTest::target_ok($node, 'wide', $wide_query,
	'the refreshed view, after later changes');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"),
	't', 'wait() on all views returns true again');

# ---- a source whose key column is renamed: the view is bound to the
# column, not its name, and goes on; dropping it is refused ----

$node->safe_psql(
	'postgres', q{
	CREATE TABLE readings (sensor int, seq int, value int, PRIMARY KEY (sensor, seq));
	INSERT INTO readings VALUES (1, 1, 10), (2, 1, 20);
	SELECT delta_join.create_view('sensor_totals', $$
		SELECT sensor, sum(value) AS total FROM readings GROUP BY sensor $$);
	ALTER TABLE readings RENAME COLUMN sensor TO sensor_id;
	INSERT INTO readings VALUES (1, 2, 5);
});
is($node->safe_psql('postgres', "SELECT delta_join.wait('sensor_totals', '60s')"),
	't', 'a view whose source key column was renamed is applied');
DeltaJoinTest::target_ok($node, 'sensor_totals',
	'SELECT sensor_id AS sensor, sum(value) AS total FROM readings GROUP BY sensor_id',
	'a renamed key column');
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER TABLE readings DROP COLUMN sensor_id');
like($err, qr/cannot drop column sensor_id of table readings because other objects depend on it/,
	'dropping the key column is refused, as for a view');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', 'the other views are not held up');

# ---- an internal error (XX000) is tried again: one that passes leaves the
# view active, one that comes back try after try for 5 s puts it in error ----
#
# PostgreSQL raises internal errors when a catalog lookup races a DDL ("cache
# lookup failed for publication", TAP 033); here a function of the query
# raises one while a flag is set, so that the test decides when it passes
# (declared IMMUTABLE, which it is not: it reads the flag).

$node->safe_psql(
	'postgres', q{
	CREATE TABLE xx_flag (on_ boolean);
	CREATE TABLE gauges (id int PRIMARY KEY, v int);
	CREATE FUNCTION checked(v int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
	BEGIN
		IF EXISTS (SELECT FROM public.xx_flag WHERE on_) THEN
			RAISE EXCEPTION 'internal trouble with % x%', v, repeat(chr(8364), 100) USING ERRCODE = 'XX000';
		END IF;
		RETURN v;
	END $$;
	INSERT INTO gauges VALUES (1, 10);
	SELECT delta_join.create_view('checked_gauges', 'SELECT id, public.checked(v) AS v FROM gauges');
	INSERT INTO xx_flag VALUES (true);
	INSERT INTO gauges VALUES (2, 20);
});
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'active' AND reason ~ '^retrying \(\d+ tries\): internal trouble with 20'
		FROM delta_join.status WHERE target = 'public.checked_gauges'}),
	'a view meeting an internal error stays active and says it is retrying');
# the reason is cut to fit delta_join.status between two characters: cut
# through a euro sign (3 bytes), it was no valid text (convert_from says)
SKIP:
{
	skip 'the server encoding is not UTF8', 1
	  if $node->safe_psql('postgres', 'SHOW server_encoding') ne 'UTF8';
	is( $node->safe_psql(
			'postgres', q{
			SELECT octet_length(reason) BETWEEN 150 AND 159
			   AND convert_from(textsend(reason), 'UTF8') ~ (repeat(chr(8364), 2) || '$')
			FROM delta_join.status WHERE target = 'public.checked_gauges'}),
		't', 'the reason is cut between two characters');
}
$node->safe_psql('postgres', 'UPDATE xx_flag SET on_ = false');
is($node->safe_psql('postgres', "SELECT delta_join.wait('checked_gauges', '60s')"),
	't', 'once the internal error passes, the view is applied');
DeltaJoinTest::target_ok($node, 'checked_gauges', 'SELECT id, v FROM gauges',
	'after an internal error that passed');

$node->safe_psql('postgres', 'UPDATE xx_flag SET on_ = true; INSERT INTO gauges VALUES (3, 30)');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error'
		FROM delta_join.status WHERE target = 'public.checked_gauges'}),
	'an internal error that comes back puts the view in error');
like(
	$node->safe_psql('postgres',
		"SELECT last_error FROM delta_join.status WHERE target = 'public.checked_gauges'"),
	qr/^failed \d+ times in a row: internal trouble with 30/,
	'its error says the internal error came back try after try');

$node->stop;
done_testing();
