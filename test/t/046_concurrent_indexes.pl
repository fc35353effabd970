# The key and lookup indexes of a target around a concurrent create or
# refresh (src/ops/concurrent.c, src/ops/views.c, src/apply/target_shape.c).
#
# The DDL guard does not ask for a target's key and lookup indexes while
# its view is backfilling (a concurrent create makes them after its fill),
# so DDL may take them away meanwhile; whatever leaves that state again
# gives the target those it lacks:
#
#  - the key dropped by an ALTER TABLE that waited for a concurrent
#    refresh's fill, and so ran after the fill committed, before the view
#    was made active: the view is made active with its key made again, and
#    the guard refuses the next drop;
#  - a lookup index dropped while a concurrent refresh waits for a writer,
#    then the refresh cancelled: the view is put back active with its
#    index;
#  - a retract view whose create was interrupted, given its primary key by
#    hand, then refresh(): the refresh makes the lookup indexes too, not
#    only those of a target without a key.
#
# A primary key on other columns, made by the owner on the target a
# concurrent create made while it waits for writers, is kept: the create
# makes the result's key a unique constraint beside it (it failed with
# "multiple primary keys ... are not allowed"); so is a deferrable primary
# key on the key's columns, put in its place while a refresh waits.
#
# Besides, what the guard and apply count as the target's indexes:
#
#  - an invalid index (a CREATE UNIQUE INDEX CONCURRENTLY that failed) on
#    a lookup index's columns does not take its place: dropping the valid
#    one is refused (apply cannot scan the invalid one);
#  - an existing target with a dropped column before its key: its primary
#    key is found (columns are counted without the dropped one), for a
#    blocking and a concurrent create.
#
# After each, the target equals its query once wait() returns.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('main');

$node->safe_psql(
	'postgres', q{
	CREATE TABLE o (id int PRIMARY KEY, item int, amount numeric);
	CREATE INDEX ON o (item);
	CREATE TABLE i (id int PRIMARY KEY, name text);
	INSERT INTO i SELECT g, 'item ' || g FROM generate_series(1, 10) g;
	INSERT INTO o SELECT g, g % 10 + 1, g FROM generate_series(1, 200) g;
	-- declared immutable so that a view may use it; waits while lock 7 is held
	CREATE FUNCTION held(numeric) RETURNS numeric LANGUAGE plpgsql IMMUTABLE AS
	  $$ BEGIN PERFORM pg_advisory_lock_shared(7); PERFORM pg_advisory_unlock_shared(7);
	     RETURN $1; END $$;});

my $query = 'SELECT o.id, o.item, i.name, held(o.amount) AS amount FROM o JOIN i ON o.item = i.id';

# Run $sql in psql in the background; returns its harness
sub start_psql
{
	my ($sql, $out, $err) = @_;
	return IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', $sql ],
		'<', \undef, '>', $out, '2>', $err);
}

# The indexes of a table, by their columns: "(id) primary,(item)"
sub indexes_of
{
	my ($table) = @_;
	return $node->safe_psql(
		'postgres', qq{
		SELECT string_agg('(' || cols || ')' || CASE WHEN indisprimary THEN ' primary' ELSE '' END,
		                  ',' ORDER BY cols)
		FROM (SELECT x.indisprimary,
		             (SELECT string_agg(a.attname, ',' ORDER BY k.n)
		              FROM unnest(x.indkey) WITH ORDINALITY k(attnum, n)
		              JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum) AS cols
		      FROM pg_index x WHERE x.indrelid = '$table'::regclass AND x.indisvalid) s});
}

# A change to each source, then wait(): the view is active and equals its query
sub view_ok
{
	my ($target, $what, %opts) = @_;
	$node->safe_psql(
		'postgres', q{
		UPDATE o SET amount = amount + 1 WHERE id % 7 = 0;
		UPDATE i SET name = name || '+' WHERE id = 2;});
	$node->safe_psql('postgres', 'DELETE FROM o WHERE id = 5') if $opts{retract};
	is($node->safe_psql('postgres', "SELECT delta_join.wait('$target', '30s')"),
		't', "$what: wait()");
	is( $node->safe_psql(
			'postgres',
			"SELECT state || '|' || coalesce(last_error, '') FROM delta_join.status WHERE target = 'public.$target'"),
		'active|', "$what: the view is active, with no error");
	DeltaJoinTest::target_ok($node, $target, $opts{query} // $query, $what,
		mode => $opts{retract} ? 'exact' : 'upsert');
}

# ---- the key dropped by DDL that waited for a concurrent refresh's fill ----

$node->safe_psql('postgres', "SELECT delta_join.create_view('w', '$query')");
is(indexes_of('w'), '(id) primary', 'w: the key made by the create');
my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(7)');
my ($rout, $rerr, $dout, $derr) = ('', '', '', '');
my $refresher = start_psql("SELECT delta_join.refresh('w', concurrently => true) >= 0",
	\$rout, \$rerr);
ok( $node->poll_query_until(
		'postgres',
		"SELECT phase = 'backfilling' FROM delta_join.progress WHERE target = 'public.w'"),
	'w: the refresh fills the target');
# (holding the view lock, which the activation takes: the drop runs while
# the view is backfilling however soon the refresh goes on once it has)
my $dropper = start_psql(
	'BEGIN; LOCK delta_join.view_catalog IN SHARE UPDATE EXCLUSIVE MODE; '
	  . 'ALTER TABLE w DROP CONSTRAINT w_pkey; COMMIT',
	\$dout, \$derr);
ok( $node->poll_query_until(
		'postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query LIKE '%ALTER TABLE w DROP%'
		  AND pid <> pg_backend_pid()}),
	'w: the drop of the key waits for the fill');
$holder->query_safe('SELECT pg_advisory_unlock(7)');
$dropper->finish;
$refresher->finish;
chomp $rout;
is($rout, 't', 'w: the refresh ends') or diag($rerr);
is($derr, '', 'w: the key is dropped while the view is still backfilling');
is(indexes_of('w'), '(id) primary', 'w: the refresh made the key again before making the view active');
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER TABLE w DROP CONSTRAINT w_pkey');
like($err, qr/cannot run ALTER TABLE: delta view "public.w" would no longer be correct/,
	'w: once active, the drop of its key is refused');
view_ok('w', 'w: refreshed while its key was dropped');

# ---- a lookup index dropped while a concurrent refresh waits, then a cancel ----

$node->safe_psql('postgres',
	"SELECT delta_join.create_view('r', '$query', options => '{\"retract\": true}')");
is(indexes_of('r'), '(id) primary,(item)', 'r: the key and the lookup index made by the create');
my $writer = $node->background_psql('postgres');

# Begin a write of a source, then run $sql in the background (into $out
# and $err) and see the create or refresh of $target wait for the writer;
# returns its harness
sub start_behind_writer
{
	my ($target, $what, $sql, $out, $err) = @_;
	$writer->query_safe('BEGIN; UPDATE i SET name = name WHERE id = 1');
	($$out, $$err) = ('', '');
	my $harness = start_psql($sql, $out, $err);
	ok( $node->poll_query_until(
			'postgres',
			"SELECT phase = 'waiting for writers' FROM delta_join.progress WHERE target = 'public.$target'"),
		"$target: $what waits for the writer");
	return $harness;
}

$refresher = start_behind_writer('r', 'the refresh',
	"SELECT delta_join.refresh('r', concurrently => true)", \$rout, \$rerr);
$node->safe_psql('postgres', 'DROP INDEX r_item_idx');
DeltaJoinTest::cancel_client($node, "refresh('r'");
$refresher->finish;
like($rerr, qr/canceling statement due to user request/, 'r: the refresh is cancelled');
$writer->query_safe('COMMIT');
is(indexes_of('r'), '(id) primary,(item)',
	'r: the cancelled refresh put the view back with its lookup index');
view_ok('r', 'r: after a cancelled refresh whose lookup index was dropped', retract => 1);

# ---- an interrupted retract create, its key added by hand, refresh() ----

my ($cout, $cerr);
my $creator = start_behind_writer('c', 'the create',
	"SELECT delta_join.create_view('c', '$query', options => '{\"retract\": true}', concurrently => true)",
	\$cout, \$cerr);
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM delta_join.progress WHERE target = 'public.c'");
$creator->finish;
$writer->query_safe('COMMIT');
ok( $node->poll_query_until(
		'postgres',
		"SELECT state = 'error' FROM delta_join.status WHERE target = 'public.c'"),
	'c: the interrupted create is put in error');
is(indexes_of('c'), '', 'c: its target has no index');
$node->safe_psql('postgres', 'ALTER TABLE c ADD PRIMARY KEY (id)');
is($node->safe_psql('postgres', "SELECT delta_join.refresh('c') > 0"), 't', 'c: refresh()');
is(indexes_of('c'), '(id) primary,(item)', 'c: refresh() made the lookup index of a target with a key');
view_ok('c', 'c: refreshed after an interrupted create', retract => 1);

# ---- a primary key of the owner's, made while a create waits ----

$creator = start_behind_writer('p', 'the create',
	"SELECT delta_join.create_view('p', '$query', concurrently => true)", \$cout, \$cerr);
$node->safe_psql('postgres', 'ALTER TABLE p ADD PRIMARY KEY (id, name)');
$writer->query_safe('COMMIT');
$creator->finish;
is($cerr, '', 'p: the create ends without an error beside a primary key on other columns');
is(indexes_of('p'), '(id),(id,name) primary', 'p: the key is a unique constraint beside it');
is($node->safe_psql('postgres', "SELECT relreplident FROM pg_class WHERE oid = 'p'::regclass"),
	'f', 'p: its old rows are logged whole, for a view that reads it');
view_ok('p', 'p: beside a primary key of its owner\'s');

# a deferrable primary key on the key's columns (apply cannot use it), put
# in the key's place while a concurrent refresh waits: kept too
$refresher = start_behind_writer('w', 'the refresh',
	"SELECT delta_join.refresh('w', concurrently => true) >= 0", \$rout, \$rerr);
$node->safe_psql('postgres',
	'ALTER TABLE w DROP CONSTRAINT w_pkey, ADD PRIMARY KEY (id) DEFERRABLE');
$writer->query_safe('COMMIT');
$refresher->finish;
is($rerr, '', 'w: the refresh ends without an error beside a deferrable primary key');
is( $node->safe_psql(
		'postgres', q{
		SELECT string_agg(indisprimary || ' ' || indimmediate, ',' ORDER BY indisprimary)
		FROM pg_index WHERE indrelid = 'w'::regclass}),
	'false true,true false', 'w: the key is a unique constraint beside it');
view_ok('w', 'w: beside a deferrable primary key');

# ---- an invalid index on a lookup index's columns ----

($ret, $out, $err) = $node->psql('postgres', 'CREATE UNIQUE INDEX CONCURRENTLY r_item_bad ON r (item)');
like($err, qr/could not create unique index "r_item_bad"/, 'r: a unique index on item fails');
($ret, $out, $err) = $node->psql('postgres', 'DROP INDEX r_item_idx');
like($err, qr/cannot run DROP INDEX: delta view "public.r" would no longer be correct.*no index on \(item\)/s,
	'r: the lookup index cannot be dropped beside an invalid index on its columns');
view_ok('r', 'r: beside an invalid index', retract => 1);

# ---- an existing target with a dropped column before its key ----

foreach my $concurrently (0, 1)
{
	my $name = $concurrently ? 'dropped_c' : 'dropped_b';
	$node->safe_psql(
		'postgres', qq{
		CREATE TABLE $name (gone int, id int PRIMARY KEY, item int, name text, amount numeric);
		ALTER TABLE $name DROP COLUMN gone;});
	($ret, $out, $err) = $node->psql('postgres',
		"SELECT delta_join.create_view('$name', '$query'"
		  . ($concurrently ? ', concurrently => true' : '') . ')');
	is($err, '', "$name: a view into a target with a dropped column")
	  and view_ok($name, "$name: a target with a dropped column");
}

$holder->quit;
$writer->quit;
$node->stop;
done_testing();
