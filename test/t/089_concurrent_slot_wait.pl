# A concurrent refresh() runs its steps in a background worker of its own
# (ops/concurrent.c).  Every background worker slot may be busy for a
# while -- a query's parallel workers hold theirs until it ends, and the
# apply worker's whole-query recomputes now run parallel plans too -- so
# the call waits for a slot (up to 30 s) instead of failing at once, as it
# did when an attack filled the slots with parallel recomputes.
#
# Here a session's parallel query holds every free slot for several
# seconds (a second query then launches no worker), and refresh(...,
# concurrently => true) called meanwhile succeeds once a slot is free.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);
use Test::More;
use DeltaJoinTest;

# Parallel plans are made cheap only in the sessions below: made cheap for
# the whole server, the apply worker's own catalog reads would take slots
# for a moment too.
my $node = DeltaJoinTest::new_node('slot_wait',
	conf => {
		max_worker_processes => 8,
		max_parallel_workers => 8,
		max_parallel_workers_per_gather => 8,
	});
my $cheap = 'SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;';

$node->safe_psql(
	'postgres', q{
	CREATE TABLE big (id int);
	INSERT INTO big SELECT generate_series(1, 6000);
	ALTER TABLE big SET (parallel_workers = 8);
	VACUUM ANALYZE big;
	CREATE TABLE items (id int PRIMARY KEY, name text);
	CREATE TABLE orders (id int PRIMARY KEY, item_id int REFERENCES items);
	CREATE INDEX ON orders (item_id);
	INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 10) g;
	INSERT INTO orders SELECT g, 1 + g % 10 FROM generate_series(1, 100) g;
	SELECT delta_join.create_view('wide',
	  'SELECT o.id, o.item_id, i.name FROM orders o JOIN items i ON i.id = o.item_id');});

# every free slot taken by parallel queries of several seconds: a query
# launches the workers it finds slots for when it starts, so one that
# started while some other process held a slot leaves it free once that
# process ends; another holder then takes it
my @holders;
my $launched;
for my $try (1 .. 4)
{
	my $holder = $node->background_psql('postgres');
	$holder->query_until(qr/holding/,
		"$cheap\n\\echo holding\nSELECT count(*) FROM big WHERE pg_sleep(0.005) IS NOT NULL;\n");
	push @holders, $holder;
	$node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'parallel worker'});
	($launched) = $node->safe_psql('postgres',
		"$cheap EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT count(*) FROM big") =~ /Workers Launched: (\d+)/;
	last if $launched == 0;
	usleep(200_000);
}
is($launched, 0, 'no slot is free: a second parallel query launches no worker');

my ($ret, $stdout, $stderr) = $node->psql('postgres',
	"SELECT delta_join.refresh('wide', concurrently => true) >= 0");
is($ret, 0, 'a concurrent refresh waits for a slot instead of failing')
  or diag($stderr);
is($stdout, 't', 'and refreshes the view');
# the holders that are still running end now (a cancelled one's psql
# exits on its error, so its quit may find the pipe closed)
$node->safe_psql('postgres',
	q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity
	  WHERE backend_type = 'client backend' AND query LIKE '%pg_sleep(0.005)%' AND pid <> pg_backend_pid()});
eval { $_->quit } foreach @holders;

$node->safe_psql('postgres', 'INSERT INTO orders VALUES (101, 3)');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"), 't',
	'the view is applied after the refresh');
DeltaJoinTest::target_ok($node, 'wide',
	'SELECT o.id, o.item_id, i.name FROM orders o JOIN items i ON i.id = o.item_id',
	'after the refresh');

$node->stop;
done_testing();
