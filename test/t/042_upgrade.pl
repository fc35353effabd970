# Upgrades in place (DESIGN.md §9): a database made with version 0.1,
# views of every kind written to, then ALTER EXTENSION delta_join UPDATE
# while a writer keeps writing.  The views keep their slot, lose no change
# and equal their queries after wait(); the updated database's objects and
# privileges are those of a fresh 0.2 install; pg_dump of a 0.1 database
# restores into a server whose default is 0.2.  And where the library does
# not run the version installed (an update not made yet, or made before the
# server loaded the library that goes with it), the views wait, saying
# what to run, and lose nothing.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('upgrade', extension => 0);

sub version
{
	my ($dbname) = @_;
	return $node->safe_psql($dbname // 'postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'delta_join'");
}

$node->safe_psql('postgres', "CREATE EXTENSION delta_join VERSION '0.1'");
is(version(), '0.1', 'version 0.1 installed');

# ---- views of every kind, made with 0.1 ----

$node->safe_psql(
	'postgres', q{
	CREATE TABLE customers (id bigint PRIMARY KEY, name text, region text);
	CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint, amount int);
	CREATE INDEX ON orders (customer_id);
	ALTER TABLE orders REPLICA IDENTITY FULL;
	CREATE TABLE refunds (id bigint PRIMARY KEY, customer_id bigint, amount int);
	CREATE INDEX ON refunds (customer_id);
	CREATE TABLE rates (region text PRIMARY KEY, factor numeric);
	CREATE INDEX ON customers (region);
	CREATE TABLE notes (id bigint PRIMARY KEY, customer_id bigint, note text);
	INSERT INTO rates VALUES ('eu', 1.1), ('us', 1.0), ('apac', 0.9);
	INSERT INTO customers SELECT g, 'c' || g, (ARRAY['eu', 'us', 'apac'])[1 + g % 3]
	  FROM generate_series(1, 50) g;
	INSERT INTO orders SELECT g, 1 + g % 50, g % 100 FROM generate_series(1, 500) g;
	INSERT INTO refunds SELECT g, 1 + g % 50, 1 FROM generate_series(1, 100) g;
	INSERT INTO notes SELECT g, 1 + g % 50, 'n' || g FROM generate_series(1, 100) g;});

my $join = 'SELECT o.id, o.customer_id, c.name, o.amount FROM orders o '
  . 'JOIN customers c ON c.id = o.customer_id';
my %views = (
	joined => [ $join, 'delta' ],
	joined_exact => [ $join, 'delta (retract)', options => '{"retract": true}' ],
	customer_orders => [
		'SELECT c.id AS customer_id, c.name, o.id AS order_id, o.amount FROM customers c '
		  . 'LEFT JOIN orders o ON o.customer_id = c.id',
		'delta (retract)',
		options => '{"retract": true}'
	],
	per_customer => [
		'SELECT customer_id, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer_id',
		'delta'
	],
	movements => [
		q{SELECT 'order' AS kind, o.id, c.id AS customer_id, c.name, o.amount FROM orders o }
		  . q{JOIN customers c ON c.id = o.customer_id UNION ALL }
		  . q{SELECT 'refund', r.id, c.id, c.name, -r.amount FROM refunds r }
		  . q{JOIN customers c ON c.id = r.customer_id},
		'delta (retract)',
		options => '{"retract": true}'
	],
	priced => [
		q{SELECT c.id, c.name, c.region, r.factor FROM customers c }
		  . q{JOIN rates /*+ OPTIONS('lookup_only'='true') */ r ON r.region = c.region},
		'delta'
	],
	noted => [
		'SELECT n.id, c.id AS customer_id, c.name, n.note FROM notes n '
		  . 'JOIN customers c ON c.id = n.customer_id',
		'keyed recompute',
		strategy => 'auto'
	],
	# an aggregate over a join: a 0.1 catalog has no path for its groups
	# through the join, so auto takes full recompute until the update
	by_region => [
		'SELECT c.region, count(*) AS n, sum(o.amount) AS total FROM orders o '
		  . 'JOIN customers c ON c.id = o.customer_id GROUP BY c.region',
		'full recompute',
		strategy => 'auto',
		options => '{"refresh_interval": "50ms"}'
	],
	ranked => [
		'SELECT id, customer_id, rank() OVER (PARTITION BY customer_id ORDER BY amount DESC, id) AS rnk FROM orders',
		'full recompute',
		strategy => 'auto',
		options => '{"refresh_interval": "50ms"}'
	],
	# a result without a key: its target has no primary key
	amounts => [
		'SELECT customer_id, amount FROM orders WHERE amount > 90',
		'full recompute',
		strategy => 'auto',
		options => '{"refresh_interval": "50ms"}'
	],);

foreach my $target (sort keys %views)
{
	my ($query, $mode, %args) = @{ $views{$target} };
	my $extra = '';
	$extra .= ", strategy => '$args{strategy}'" if $args{strategy};
	$extra .= ", options => '$args{options}'" if $args{options};
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$target', \$q\$ $query \$q\$ $extra)");
}
is( $node->safe_psql('postgres',
		'SELECT string_agg(target || \' \' || mode, \', \' ORDER BY target) FROM delta_join.views'),
	join(', ', map { "public.$_ $views{$_}[1]" } sort keys %views),
	'ten views made with 0.1, one of each kind');

# 0.1 made a keyless target with the default replica identity (this
# library gives it FULL): as 0.1 left it, until the update
$node->safe_psql('postgres', 'ALTER TABLE amounts REPLICA IDENTITY DEFAULT');
my $slot_before = $node->safe_psql('postgres',
	"SELECT slot_name || ' ' || restart_lsn FROM pg_replication_slots");

# every change a view may see: orders and refunds inserted, updated and
# deleted, customers renamed, notes written (the join key of a row never
# changes; the lookup-only rates never change)
my $scripts = DeltaJoinWorkload::write_scripts(
	orders => [
		4, q{
\set c random(1, 50)
\set o random(1, 2000)
INSERT INTO orders VALUES (:o, :c, :o % 97) ON CONFLICT (id) DO UPDATE SET amount = orders.amount + 1;
}
	],
	deletes => [
		1, q{
\set o random(1, 2000)
DELETE FROM orders WHERE id = :o;
DELETE FROM refunds WHERE id = :o;
}
	],
	customers => [
		2, q{
\set c random(1, 50)
UPDATE customers SET name = 'c' || :c || '-' || random() WHERE id = :c;
}
	],
	others => [
		2, q{
\set c random(1, 50)
\set o random(1, 2000)
INSERT INTO refunds VALUES (:o, :c, 1) ON CONFLICT (id) DO UPDATE SET amount = refunds.amount + 1;
INSERT INTO notes VALUES (:o, :c, 'n') ON CONFLICT (id) DO UPDATE SET note = notes.note || 'x';
}
	],);

DeltaJoinWorkload::pgbench_ok($node, $scripts, 'writes under 0.1',
	seed => 1, clients => 2, transactions => 200);

# ---- the update, while a writer writes ----

my $writer = DeltaJoinWorkload::pgbench_start($node, $scripts,
	seed => 2, clients => 2, seconds => 6);
$node->safe_psql('postgres', 'SELECT pg_sleep(1)');
$node->safe_psql('postgres', 'ALTER EXTENSION delta_join UPDATE');
is(version(), '0.2', 'ALTER EXTENSION delta_join UPDATE updates to 0.2 while a writer writes');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(relname || ' ' || relreplident::text, ', ' ORDER BY relname) FROM pg_class
		  WHERE relname IN ('amounts', 'joined')}),
	'amounts f, joined d',
	'the update logs old rows whole for the keyless target 0.1 made, and leaves keyed targets be');
my $res = DeltaJoinWorkload::pgbench_finish($writer);
ok($res->{rc} == 0 && $res->{failed} == 0 && $res->{processed} > 0,
	"the writer went on: $res->{processed} transactions, none failed")
  or diag("$res->{stdout}\n$res->{stderr}");
DeltaJoinWorkload::pgbench_ok($node, $scripts, 'writes under 0.2',
	seed => 3, clients => 2, transactions => 200);

sub check_all
{
	my ($name) = @_;
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'), "$name: wait() returns true");
	foreach my $target (sort keys %views)
	{
		# (the upsert join keeps the rows of deleted orders)
		DeltaJoinTest::target_ok($node, $target, $views{$target}[0], $name,
			mode => $target eq 'joined' ? 'upsert' : 'exact');
	}
	is( $node->safe_psql(
			'postgres', q{
			SELECT string_agg(DISTINCT state || coalesce(' ' || reason, ''), '; ')
			FROM delta_join.status}),
		'active', "$name: every view is active");
}
check_all('after the update');
is( $node->safe_psql('postgres',
		'SELECT count(*) FROM delta_join.view_catalog WHERE stale_since_lsn IS NOT NULL'),
	'0', 'no view missed a change');
is( $node->safe_psql('postgres', "SELECT slot_name FROM pg_replication_slots"),
	(split / /, $slot_before)[0],
	'the views kept their slot');
# (0.1 made query views without a dependency on the extension: DROP
# EXTENSION ... CASCADE left them behind, keeping their sources)
is( $node->safe_psql(
		'postgres', q{
		SELECT count(*) FILTER (WHERE d.objid IS NULL) || ' of ' || count(*)
		FROM delta_join.view_catalog v
		LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = v.query_view
		  AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'n'}),
	'0 of ' . scalar(keys %views),
	'the update makes the query views of 0.1 depend on the extension');

# ---- the same objects and privileges as a fresh 0.2 install ----

# every object of the extension: its definition (views, functions), its
# privileges and initial privileges (pg_dump compares the two), and what an
# ordinary role may do with it
$node->safe_psql('postgres', 'CREATE ROLE someone');
my $objects = q{
	WITH member AS (
		SELECT d.classid, d.objid, pg_describe_object(d.classid, d.objid, 0) AS object
		FROM pg_depend d
		WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'delta_join'))
	SELECT m.object,
	       coalesce(p.proacl::text, c.relacl::text, t.typacl::text, ''),
	       coalesce((SELECT string_agg(a.attname || '=' || a.attacl::text, ',' ORDER BY a.attnum)
	                 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL), ''),
	       coalesce((SELECT string_agg(i.privtype || i.objsubid || '=' || i.initprivs::text, ','
	                                   ORDER BY i.objsubid)
	                 FROM pg_init_privs i WHERE i.classoid = m.classid AND i.objoid = m.objid), ''),
	       CASE WHEN p.oid IS NOT NULL
	            THEN has_function_privilege('someone', p.oid, 'EXECUTE')::text
	            WHEN c.oid IS NOT NULL
	            THEN has_table_privilege('someone', c.oid, 'SELECT')::text || has_table_privilege('someone', c.oid, 'INSERT')::text
	                 || has_table_privilege('someone', c.oid, 'UPDATE')::text || has_table_privilege('someone', c.oid, 'DELETE')::text
	            WHEN t.oid IS NOT NULL THEN has_type_privilege('someone', t.oid, 'USAGE')::text
	            ELSE '' END,
	       CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid)
	            WHEN p.oid IS NOT NULL AND p.prokind = 'f' THEN pg_get_functiondef(p.oid)
	            ELSE '' END
	FROM member m
	LEFT JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
	LEFT JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
	LEFT JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
	UNION ALL
	SELECT 'schema delta_join', coalesce(nspacl::text, ''), '', '',
	       has_schema_privilege('someone', oid, 'USAGE')::text || has_schema_privilege('someone', oid, 'CREATE')::text, ''
	FROM pg_namespace WHERE nspname = 'delta_join'
	ORDER BY 1};
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION delta_join');
is(version('fresh'), '0.2', 'a fresh install is version 0.2');
my $updated = $node->safe_psql('postgres', $objects);
my $fresh = $node->safe_psql('fresh', $objects);
ok($updated eq $fresh, 'the updated objects, their privileges and definitions are those of a fresh install')
  or diag("updated:\n$updated\n\nfresh:\n$fresh");
like($fresh, qr/^function delta_join\._prepare_node\(\)\|\{[^|]*\}\|\|[^|]*\|false\|/m,
	'(the comparison covers the privileges: _prepare_node is not executable by PUBLIC)');

# ---- a library that does not run the installed version ----

# Simulated as an update would leave it: the installed version set to one
# older than the library runs (an update script that changes what the
# library reads raises DJ_OLDEST_VERSION), then to a newer one (ALTER
# EXTENSION run before the server loaded the library installed with it).
# The views wait, saying what to run, and apply nothing meanwhile.
my $applied_before =
  $node->safe_psql('postgres', "SELECT sum(keys_applied) FROM delta_join.status");
my $log_offset = -s $node->logfile;
foreach my $case ([ '0.0', qr/run ALTER EXTENSION delta_join UPDATE$/ ],
	[ '9.0', qr/restart the server, so that it loads the library installed with them$/ ])
{
	my ($installed, $says) = @$case;
	$node->safe_psql('postgres',
		"UPDATE pg_extension SET extversion = '$installed' WHERE extname = 'delta_join'");
	DeltaJoinWorkload::pgbench_ok($node, $scripts, "writes under $installed",
		seed => 4, clients => 2, transactions => 100);
	my $status = $node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT state || ': ' || reason, '; ') FROM delta_join.status");
	like($status, qr/^stalled: the SQL objects of delta_join in this database are version \Q$installed\E, /,
		"objects of version $installed: every view is stalled");
	like($status, $says, '... saying what to do');
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT delta_join.create_view('another', 'SELECT id, name FROM customers')");
	like($err, qr/ERROR:  the SQL objects of delta_join in this database are version \Q$installed\E, which the library \(version 0.2\) does not run/,
		'create_view is refused');
	($rc, $out, $err) = $node->psql('postgres', "SELECT delta_join.wait(NULL, '1s')");
	like($err, qr/HINT:  (Run ALTER EXTENSION delta_join UPDATE|Restart the server)/,
		'wait() is refused, with what to do');
}
is($node->safe_psql('postgres', "SELECT sum(keys_applied) FROM delta_join.status"),
	$applied_before, 'nothing was applied meanwhile');
ok( $node->wait_for_log(
		qr/delta_join worker for database \d+ waits: the SQL objects of delta_join in this database are version [09]\.0, /,
		$log_offset),
	'the worker said once in the log that it waits');

$node->safe_psql('postgres',
	"UPDATE pg_extension SET extversion = '0.2' WHERE extname = 'delta_join'");
check_all('once the library runs the installed version again');

# ---- pg_dump of a 0.1 database, restored where the default is 0.2 ----

$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql(
	'old', qq{
	CREATE EXTENSION delta_join VERSION '0.1';
	CREATE TABLE customers (id bigint PRIMARY KEY, name text, region text);
	CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint, amount int);
	CREATE INDEX ON orders (customer_id);
	ALTER TABLE orders REPLICA IDENTITY FULL;
	INSERT INTO customers VALUES (1, 'ann', 'eu'), (2, 'bob', 'us');
	INSERT INTO orders VALUES (10, 1, 5), (11, 2, 7), (12, 1, 1);
	SELECT delta_join.create_view('joined_exact', \$q\$ $join \$q\$, options => '{"retract": true}');
	SELECT delta_join.create_view('per_customer', \$q\$ $views{per_customer}[0] \$q\$);});
DeltaJoinTest::dump_restore($node, 'old', 'restored',
	'a 0.1 database, where the default version is 0.2');
is(version('restored'), '0.2', 'the restored database has version 0.2');
ok($node->safe_psql('restored', $objects) eq $fresh,
	'with the objects and privileges of a fresh install');
is( $node->safe_psql('restored',
		'SELECT string_agg(target || \' \' || mode, \', \' ORDER BY target) FROM delta_join.views'),
	'public.joined_exact delta (retract), public.per_customer delta',
	'and the views of the dump');
$node->safe_psql('restored',
	"SELECT delta_join.refresh('joined_exact'); SELECT delta_join.refresh('per_customer')");
$node->safe_psql('restored',
	"INSERT INTO orders VALUES (13, 2, 4); DELETE FROM orders WHERE id = 10; UPDATE customers SET name = 'anne' WHERE id = 1");
is($node->safe_psql('restored', "SELECT delta_join.wait(NULL, '60s')"),
	't', 'refreshed, they are maintained');
DeltaJoinTest::target_ok($node, 'joined_exact', $join, 'the restored join view',
	dbname => 'restored');
DeltaJoinTest::target_ok($node, 'per_customer', $views{per_customer}[0],
	'the restored aggregate view', dbname => 'restored');

$node->stop;
done_testing();
