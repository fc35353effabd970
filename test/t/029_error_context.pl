# Errors on the apply path say where (issue 19), and a view in error keeps
# its error's detail and hint.
#
# When a view cannot be applied (here: its target rejects a row through a
# CHECK constraint its owner added, or a function of its query raises), the
# warning in the server log carries the error's context: the view, how far
# its batch goes, and the source and key the apply was at -- the key's
# columns and values, printed by their types' output functions --,
# whichever applier met the error: the join's walk, an aggregate's groups
# (a set of one-column groups at once, or one group at a time), an outer
# join's region query, keyed recompute, and full recompute (which names
# the whole result).  delta_join.status keeps the error's detail and hint,
# to the roles that can act as the target's owner only, as the message.
#
# The database starts at version 0.1, whose catalog has no room for a
# detail or a hint: the library runs it, a view in error keeping its
# message alone, until ALTER EXTENSION delta_join UPDATE.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('error_context', extension => 0);
$node->safe_psql('postgres', "CREATE EXTENSION delta_join VERSION '0.1'");

my $wide_query = $DeltaJoinTest::wide_query;
DeltaJoinTest::worked_example($node, merchants => 3, items => 5, orders => 20);

# Wait until the views are in error; returns the states, for the message
sub in_error
{
	my (@targets) = @_;
	my $list = join(', ', map { "'public.$_'" } @targets);
	my $query = "SELECT count(*) = " . scalar(@targets)
	  . " FROM delta_join.views WHERE state = 'error' AND target::text IN ($list)";
	return $node->poll_query_until('postgres', $query);
}

# The context line of a view's error in the server log, as a regex (the
# first of the error's context lines, or one after it)
sub context_re
{
	my ($target, $where) = @_;
	return qr/(?:CONTEXT:  |^\t)applying delta view "public\.$target", changes up to [0-9A-F]+\/[0-9A-F]+, $where$/m;
}

# ---- version 0.1: the library runs its catalog, an error keeps its message ----

$node->safe_psql(
	'postgres', qq{
	SELECT delta_join.create_view('early', \$\$ $wide_query \$\$);
	ALTER TABLE early ADD CONSTRAINT small CHECK (amount < 1000);
	INSERT INTO orders VALUES (3, 1, 700, 7000);
});
ok(in_error('early'), 'version 0.1: the view whose target rejects a row goes to error');
is( $node->safe_psql(
		'postgres', q{
		SELECT last_error FROM delta_join.status WHERE target = 'public.early'}),
	'new row for relation "early" violates check constraint "small"',
	'version 0.1: status shows the message');
is( $node->safe_psql(
		'postgres', q{
		SELECT string_agg(attname, ', ' ORDER BY attnum) FROM pg_attribute
		WHERE attrelid = 'delta_join.view_catalog'::regclass AND attname LIKE 'last_error%'}),
	'last_error, last_error_time',
	'version 0.1: the catalog has no room for a detail or a hint');
ok( $node->log_contains(
		context_re('early', 'source "public.orders", key \(merchant_id, item_id, order_id\) = \(3, 1, 700\)')),
	'version 0.1: the server log says where the error was raised');

$node->safe_psql('postgres', 'ALTER EXTENSION delta_join UPDATE');
is( $node->safe_psql(
		'postgres', q{
		SELECT last_error_detail IS NULL AND last_error_hint IS NULL
		FROM delta_join.status WHERE target = 'public.early'}),
	't', 'after the update: an error of version 0.1 has no detail or hint');
$node->safe_psql(
	'postgres', q{
	DELETE FROM orders WHERE order_id = 700;
	SELECT delta_join.refresh('early');
	INSERT INTO orders VALUES (3, 1, 701, 7001);
});
ok(in_error('early'), 'after the update: the refreshed view goes to error again');
is( $node->safe_psql(
		'postgres', q{
		SELECT last_error_detail, last_error_hint IS NULL
		FROM delta_join.status WHERE target = 'public.early'}),
	'Failing row contains (3, 701, 1, item 1, 7001.00).|t',
	'after the update: status keeps the detail of the error');

# ---- every applier says which source and key ----

$node->safe_psql(
	'postgres', q{
	DELETE FROM orders WHERE order_id = 701;
	CREATE TABLE visits (day date, page text, n int, PRIMARY KEY (day, page));
	INSERT INTO visits VALUES ('2026-01-01', 'home', 1);
});
my %views = (
	# the join's walk, from the changed order
	wide => [ $wide_query, 'CHECK (amount < 1000)' ],
	# a one-column group key: a set of groups an execution
	per_merchant => [
		'SELECT merchant_id, sum(amount) AS total FROM orders GROUP BY merchant_id',
		'CHECK (total < 3000)'
	],
	# a two-column group key: a group an execution
	per_item => [
		'SELECT merchant_id, item_id, sum(amount) AS total FROM orders GROUP BY merchant_id, item_id',
		'CHECK (total < 3000)'
	],
	# an outer join: the region query of the changed order
	item_orders => [
		'SELECT i.merchant_id, i.item_id, i.item_name, o.merchant_id AS o_merchant_id, '
		  . 'o.item_id AS o_item_id, o.order_id, o.amount FROM items i '
		  . 'LEFT JOIN orders o ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id',
		'CHECK (amount < 1000)'
	],
	# keyed recompute of the join
	wide_keyed => [ $wide_query, 'CHECK (amount < 1000)', strategy => 'none' ],
	# full recompute
	ranked => [
		'SELECT merchant_id, order_id, amount, rank() OVER (PARTITION BY merchant_id ORDER BY amount DESC, order_id) AS rnk FROM orders',
		'CHECK (amount < 1000)',
		strategy => 'auto',
		options => '{"refresh_interval": "50ms"}'
	],
	# a date and a text key, printed by their output functions
	daily => [
		'SELECT day, page, sum(n) AS n FROM visits GROUP BY day, page',
		'CHECK (n < 100)'
	],);
foreach my $target (sort keys %views)
{
	my ($query, $check, %args) = @{ $views{$target} };
	my $extra = '';
	$extra .= ", strategy => '$args{strategy}'" if $args{strategy};
	$extra .= ", options => '$args{options}'" if $args{options};
	$node->safe_psql(
		'postgres', qq{
		SELECT delta_join.create_view('$target', \$q\$ $query \$q\$ $extra);
		ALTER TABLE $target ADD CONSTRAINT rejects $check;});
}
is( $node->safe_psql(
		'postgres', q{
		SELECT string_agg(target || ' ' || mode, ', ' ORDER BY target) FROM delta_join.views
		WHERE target::text <> 'public.early'}),
	'public.daily delta, public.item_orders delta, public.per_item delta, '
	  . 'public.per_merchant delta, public.ranked full recompute, public.wide delta, '
	  . 'public.wide_keyed keyed recompute',
	'one view of each applier');

$node->safe_psql(
	'postgres', q{
	INSERT INTO orders VALUES (1, 2, 500, 5000);
	INSERT INTO visits VALUES ('2026-01-02', 'a "b", c', 500);
});
ok(in_error(sort keys %views), 'every view whose target rejects a row goes to error');

my $order = 'source "public.orders", key \(merchant_id, item_id, order_id\) = \(1, 2, 500\)';
my %where = (
	wide => $order,
	per_merchant => 'source "public.orders", key \(merchant_id\) = \(1\)',
	per_item => 'source "public.orders", key \(merchant_id, item_id\) = \(1, 2\)',
	item_orders => $order,
	wide_keyed => $order,
	ranked => 'recomputing its whole result',
	daily => 'source "public.visits", key \(day, page\) = \(2026-01-02, a "b", c\)');
foreach my $target (sort keys %where)
{
	ok($node->log_contains(context_re($target, $where{$target})),
		"$target: the error's context names the source and key");
}
like(
	slurp_file($node->logfile),
	qr/WARNING:  delta view "public\.wide" is in error and no longer maintained: new row for relation "wide" violates check constraint "rejects"\n.*DETAIL:  Failing row contains \(1, 500, 2, item 2, 5000\.00\)\.\n.*HINT:  Fix the cause, then rebuild the view with delta_join\.refresh\(\)\.\n.*CONTEXT:  applying delta view "public\.wide"/,
	'the warning carries the error\'s message, detail and context');

# ---- a detail and a hint, shown to the target's owner only ----

$node->safe_psql(
	'postgres', q{
	CREATE FUNCTION checked(amount numeric) RETURNS numeric
	IMMUTABLE LANGUAGE plpgsql AS $$
	BEGIN
		IF amount < 0 THEN
			RAISE EXCEPTION 'negative amount %', amount
				USING DETAIL = 'Amounts are never negative.', HINT = 'Correct the order.';
		END IF;
		RETURN amount;
	END $$;
	SELECT delta_join.create_view('checked', $$
		SELECT o.merchant_id, o.item_id, o.order_id, i.item_name, checked(o.amount) AS amount
		FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id $$);
	INSERT INTO orders VALUES (2, 3, 600, -5);
});
ok(in_error('checked'), 'a view whose query raises goes to error');
is( $node->safe_psql(
		'postgres', q{
		SELECT last_error, last_error_detail, last_error_hint
		FROM delta_join.status WHERE target = 'public.checked'}),
	'negative amount -5.00|Amounts are never negative.|Correct the order.',
	'status keeps the message, the detail and the hint');
ok( $node->log_contains(
		context_re(
			'checked',
			'source "public.orders", key \(merchant_id, item_id, order_id\) = \(2, 3, 600\)')),
	'the context of an error of the query itself');
like(
	slurp_file($node->logfile),
	qr/is in error and no longer maintained: negative amount -5\.00\n.*DETAIL:  Amounts are never negative\.\n.*HINT:  Correct the order\.\n/,
	'the warning carries the error\'s own hint');

$node->safe_psql('postgres', 'CREATE ROLE dj_reader');
is( $node->safe_psql(
		'postgres', q{
		SET ROLE dj_reader;
		SELECT last_error, last_error_detail IS NULL, last_error_hint IS NULL
		FROM delta_join.status WHERE target = 'public.checked'}),
	'(shown to the owner of the target only)|t|t',
	'another role sees neither the message, the detail nor the hint');

$node->stop;
done_testing();
