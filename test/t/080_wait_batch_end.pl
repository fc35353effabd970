# delta_join.wait() waits for what was committed before its call, and no
# longer than that.
#
# wait() waits until the views have applied the WAL up to the insert
# position at its call.  While the worker applies a batch, its own writes
# follow the batch's end, so a wait() called then used to wait for the
# next batch, which first reads all of those writes (70 MB for a
# 100,000-row UPDATE of the benchmark).  wait() now reads the WAL from
# where the worker's batch reads to: when nothing was committed there, the
# batch is enough.  Here the worker stops in an AFTER trigger of the
# target, in the middle of a batch, after writing 10 MB of its own.
#
# A change committed meanwhile must still be waited for: a wait() that
# stopped at the batch's end would return before the next batch, which
# first reads those 10 MB, applied it.  With nothing committed meanwhile,
# wait() must not return before the batch itself is applied.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

# (no autovacuum: nothing but the test commits while it looks)
my $node = DeltaJoinTest::new_node('wait_batch_end', conf => { autovacuum => 'off' });
DeltaJoinTest::worked_example($node);
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('wide', \$q\$ $DeltaJoinTest::wide_query \$q\$)");
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"), 't', 'the view is fresh');

# The worker stops for a while in the middle of the batch that writes an
# amount of 12345 (an AFTER trigger on the target is allowed), after
# writes of its own
$node->safe_psql(
	'postgres', q{
CREATE TABLE slow_marks (at timestamptz);
CREATE FUNCTION slow_down() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.amount = 12345 THEN
		INSERT INTO public.slow_marks
		  SELECT pg_catalog.clock_timestamp() FROM pg_catalog.generate_series(1, 150000);
		PERFORM pg_catalog.pg_sleep(4);
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER slow_down AFTER INSERT OR UPDATE ON wide FOR EACH ROW EXECUTE FUNCTION slow_down();
});

# Wait until the worker sleeps in the trigger: its batch is being applied
sub worker_in_trigger
{
	$node->poll_query_until(
		'postgres', q{
SELECT count(*) > 0 FROM pg_stat_activity
WHERE backend_type = 'delta_join worker' AND wait_event = 'PgSleep'})
	  or die 'the worker did not reach the trigger';
}

$node->safe_psql('postgres',
	'UPDATE orders SET amount = 12345 WHERE merchant_id = 1 AND order_id = 1');
worker_in_trigger();

# committed after the position the batch reads to, before wait() is called
$node->safe_psql('postgres',
	'UPDATE orders SET amount = 777 WHERE merchant_id = 2 AND order_id = 2');
my $out = $node->safe_psql(
	'postgres', q{
SELECT delta_join.wait('wide', '60s');
SELECT amount FROM wide WHERE merchant_id = 2 AND order_id = 2;
});
is($out, "t\n777.00",
	'a change committed while a batch was applied is applied when wait() returns');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query, 'after the slow batch');

# Nothing committed after the batch's end: wait() needs that batch, and
# returns once it is applied, not before
$node->safe_psql('postgres',
	'UPDATE orders SET amount = CASE WHEN order_id = 1 THEN 12345 ELSE amount + 1 END'
	  . ' WHERE merchant_id = 3');
worker_in_trigger();
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', 'wait() called in the middle of a batch');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query, 'when it returns');

$node->stop;
done_testing();
