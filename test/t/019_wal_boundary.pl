# The apply worker on an idle server whose WAL insert position sits just
# after a page header (DESIGN.md §5 "Batches adapt to the load", §6.6).
#
# When the last record ends exactly at a WAL page boundary, or after a WAL
# segment switch (pg_switch_wal(), archive_timeout), the insert position
# that GetXLogInsertRecPtr() / pg_current_wal_insert_lsn() reports is the
# start of the next page plus its header (+24 bytes, or +40 at a segment
# start): WAL that does not exist yet.  The worker wakes up every so often
# while idle, and must not ask for a position past the end of the WAL
# there is (XLogFlush of it fails with "xlog flush request ... is not
# satisfied", the worker exits, and a new one fails the same way for as
# long as nothing else writes WAL).
#
# Two ways there: pg_switch_wal() after a write, and non-transactional
# logical messages sized so that the last one ends at a page boundary.
# Each state is held, idle, for longer than the worker's idle wake-up; the
# worker that ran before must still run, and the server log must show no
# failed flush request.  Then writes are still applied.  Last, records
# larger than the reader's buffer, read after a commit (see below).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('main');
DeltaJoinTest::worked_example($node);

my %views = (
	order_item_wide => $DeltaJoinTest::wide_query,
	merchant_names => q{SELECT DISTINCT o.merchant_id, i.item_name
  FROM orders o JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id});
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('order_item_wide', \$q\$ $views{order_item_wide} \$q\$)");
$node->safe_psql('postgres',
	    "SELECT delta_join.create_view('merchant_names', \$q\$ $views{merchant_names} \$q\$, "
	  . q{strategy => 'auto', options => '{"refresh_interval": "100ms"}')});
DeltaJoinWorkload::check_views($node, \%views, 'before');
my $pid = DeltaJoinWorkload::worker_pid($node);
ok(defined $pid, 'a worker runs');

# Pads the WAL with non-transactional logical messages until the insert
# position is just past a page header; returns that position, or '' when
# other WAL kept getting in the way
my $pad_sql = q{
DO $$
DECLARE
  lsn pg_lsn;
  r int;
BEGIN
  FOR tries IN 1 .. 100 LOOP
    lsn := pg_current_wal_insert_lsn();
    IF (lsn - '0/0'::pg_lsn) % 8192 = 24 THEN
      RETURN;
    END IF;
    r := 8192 - ((lsn - '0/0'::pg_lsn) % 8192)::int;
    -- a message record is 55 bytes plus the message (long data header)
    PERFORM pg_logical_emit_message(false, 'pad',
                                    repeat('x', CASE WHEN r < 400 THEN 500 ELSE r - 57 END));
  END LOOP;
END $$;
SELECT CASE WHEN (pg_current_wal_insert_lsn() - '0/0'::pg_lsn) % 8192 = 24
            THEN pg_current_wal_insert_lsn()::text ELSE '' END};

# Holds the insert position where it is, idle, for 2.5 s; true when
# nothing else wrote WAL meanwhile
sub hold_idle
{
	my ($lsn) = @_;
	usleep(2_500_000);
	return $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()') eq $lsn;
}

my $log_offset = -s $node->logfile;

# ---- 1. after a WAL segment switch ----

my ($held, $lsn) = (0, '');
for my $try (1 .. 3)
{
	$node->safe_psql('postgres', 'UPDATE items SET item_name = item_name || \'.\' WHERE item_id = 1');
	ok(DeltaJoinWorkload::wait_views($node), "switch, try $try: wait() returns true");
	$lsn = $node->safe_psql('postgres',
		'SELECT pg_switch_wal(); SELECT pg_current_wal_insert_lsn()');
	$lsn = (split /\n/, $lsn)[-1];
	$held = hold_idle($lsn);
	last if $held;
}
SKIP:
{
	skip 'other WAL moved the insert position after every switch', 2 unless $held;
	note("insert position $lsn held after a segment switch");
	is(DeltaJoinWorkload::worker_pid($node), $pid,
		'switch: the worker that ran before still runs');
	ok( !$node->log_contains(qr/xlog flush request .* is not satisfied/, $log_offset),
		'switch: no flush request past the end of the WAL')
	  or diag(
		join("\n",
			grep { /xlog flush request|background worker "delta_join worker"/ }
			  split /\n/, substr(slurp_file($node->logfile), $log_offset)));
}
$pid = DeltaJoinWorkload::worker_pid($node);

# ---- 2. after a record that ends at a page boundary ----

$log_offset = -s $node->logfile;
($held, $lsn) = (0, '');
for my $try (1 .. 3)
{
	$lsn = $node->safe_psql('postgres', $pad_sql);
	next if $lsn eq '';
	$held = hold_idle($lsn);
	last if $held;
}
SKIP:
{
	skip 'could not hold the insert position at a page boundary', 2 unless $held;
	note("insert position $lsn held at a page boundary");
	is(DeltaJoinWorkload::worker_pid($node), $pid,
		'page boundary: the worker that ran before still runs');
	ok( !$node->log_contains(qr/xlog flush request .* is not satisfied/, $log_offset),
		'page boundary: no flush request past the end of the WAL')
	  or diag(
		join("\n",
			grep { /xlog flush request|background worker "delta_join worker"/ }
			  split /\n/, substr(slurp_file($node->logfile), $log_offset)));
}

# ---- writes are still applied ----

$node->safe_psql(
	'postgres', q{
	UPDATE items SET item_name = 'after ' || item_id WHERE merchant_id = 2;
	INSERT INTO orders VALUES (1, 2, 1000, 5);});
DeltaJoinWorkload::check_views($node, \%views, 'after');

# ---- records larger than the reader's buffer, after a commit ----
#
# A 300 kB logical message is one WAL record, larger than the buffer in
# which the WAL reader puts together records that span pages, so the reader
# makes that buffer larger.  Read in the same decoding round as a source
# transaction's commit (the worker is stopped meanwhile), and then again in
# later rounds: the reader must keep its buffer in memory of its own.  It
# was once made in the memory of the round's transaction (where replaying
# the commit leaves the current context), freed at its end, and written to
# by the next round: the worker crashed, and again after every restart.
for my $round (1 .. 3)
{
	ok(DeltaJoinWorkload::stop_worker_idle($node, $pid),
		"big records, round $round: the worker is stopped while idle");
	$node->safe_psql('postgres',
		"UPDATE orders SET amount = amount + 1 WHERE order_id % 10 = $round");
	$node->safe_psql('postgres',
		"SELECT pg_logical_emit_message(false, 'big', repeat('x', 300000))");
	$node->safe_psql('postgres',
		"UPDATE items SET item_name = item_name || '+' WHERE item_id = $round");
	kill 'CONT', $pid;
	is( $node->safe_psql(
			'postgres', "SELECT delta_join.wait('order_item_wide', '60s')"),
		't',
		"big records, round $round: the view caught up");
}
is(DeltaJoinWorkload::worker_pid($node), $pid,
	'big records: the worker that read them still runs');
DeltaJoinWorkload::check_views($node, \%views, 'after big records');
ok(!$node->log_contains(qr/terminated by signal/), 'big records: no process crashed');

$node->stop;
done_testing();
