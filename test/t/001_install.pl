# Installing delta_join.
#
# CREATE EXTENSION works on a server set up for delta views, and on one that
# is not it fails before creating anything, with an error naming the setting
# to change: the library must be preloaded, wal_level must be logical, and
# where the server restricts output plugins (output_plugin_libraries),
# delta_join must be allowed as one.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

# Try CREATE EXTENSION on $node; return psql's exit code and stderr.
sub try_create_extension
{
	my ($node) = @_;
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres', 'CREATE EXTENSION delta_join',
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($ret, $stderr);
}

sub extension_count
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'delta_join'");
}

# ---- a server set up for delta views ----

my $node = DeltaJoinTest::new_node('main');
is( $node->safe_psql(
		'postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'delta_join'"),
	'0.2',
	'CREATE EXTENSION installs version 0.2');
is( $node->safe_psql(
		'postgres', 'SHOW delta_join.strategy'),
	'eventual',
	'settings are defined, strategy defaults to eventual');
$node->stop;

# ---- the library is not in shared_preload_libraries ----

my $bare = DeltaJoinTest::new_node(
	'no_preload',
	conf => { shared_preload_libraries => undef },
	extension => 0);
my ($ret, $stderr) = try_create_extension($bare);
isnt($ret, 0, 'without shared_preload_libraries: CREATE EXTENSION fails');
like(
	$stderr,
	qr/ERROR:  55000: delta_join must be loaded via shared_preload_libraries/,
	'... with SQLSTATE 55000, naming shared_preload_libraries');
like(
	$stderr,
	qr/HINT:  .*shared_preload_libraries = 'delta_join'/,
	'... and a hint with the line to add');
is(extension_count($bare), '0', '... and leaves nothing behind');
$bare->stop;

# ---- wal_level is not logical ----

my $replica = DeltaJoinTest::new_node(
	'replica',
	conf => { wal_level => 'replica' },
	extension => 0);
($ret, $stderr) = try_create_extension($replica);
isnt($ret, 0, 'with wal_level = replica: CREATE EXTENSION fails');
like(
	$stderr,
	qr/ERROR:  55000: delta_join requires wal_level = logical/,
	'... naming wal_level');
like($stderr, qr/HINT:  .*wal_level = logical/,
	'... and a hint with the line to set');
is(extension_count($replica), '0', '... and leaves nothing behind');
$replica->stop;

# ---- output_plugin_libraries does not list delta_join ----

SKIP:
{
	skip 'this server has no output_plugin_libraries parameter', 3
	  unless DeltaJoinTest::has_output_plugin_libraries();

	# the parameter keeps its default, 'pgoutput, test_decoding'
	my $restricted = DeltaJoinTest::new_node(
		'restricted',
		conf => { output_plugin_libraries => undef },
		extension => 0);
	($ret, $stderr) = try_create_extension($restricted);
	isnt($ret, 0,
		'without delta_join in output_plugin_libraries: CREATE EXTENSION fails');
	like(
		$stderr,
		qr/HINT:  .*"\Qoutput_plugin_libraries = 'pgoutput, test_decoding, delta_join'\E"/,
		'... with a hint giving the exact line to add');
	is(extension_count($restricted), '0', '... and leaves nothing behind');
	$restricted->stop;
}

done_testing();
