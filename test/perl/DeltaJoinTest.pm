=pod

=head1 NAME

DeltaJoinTest - start PostgreSQL servers ready for delta_join TAP tests

=head1 SYNOPSIS

  use PostgreSQL::Test::Utils;
  use Test::More;
  use DeltaJoinTest;

  # started, with CREATE EXTENSION delta_join done in database postgres
  my $node = DeltaJoinTest::new_node('main');

  # initialised and configured, not started; settings can be overridden
  # (undef removes one of ours), e.g. a server without the library:
  my $bare = DeltaJoinTest::init_node('bare',
	  conf => { shared_preload_libraries => undef });

=head1 DESCRIPTION

A delta_join server needs C<wal_level = logical>, the library in
C<shared_preload_libraries> and, on servers that have the parameter
(PostgreSQL 15.20 and later minors), C<delta_join> in
C<output_plugin_libraries>.  This module writes those settings, and only
those the server knows: an unknown parameter in postgresql.conf stops a
server from starting.

Tests find this module through C<PROVE_FLAGS = -I test/perl> (the Makefile).

=cut

package DeltaJoinTest;

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

# Cached answer of has_output_plugin_libraries()
my $has_opl;

=pod

=head1 FUNCTIONS

=over

=item has_output_plugin_libraries()

True when the server binary on PATH has the C<output_plugin_libraries>
parameter.

=cut

sub has_output_plugin_libraries
{
	if (!defined $has_opl)
	{
		my ($stdout, $stderr) = run_command([ 'postgres', '--describe-config' ]);
		$has_opl = ($stdout =~ /^output_plugin_libraries\t/m) ? 1 : 0;
	}
	return $has_opl;
}

=pod

=item settings(%overrides)

The postgresql.conf settings of a delta_join server, as a hash reference:
ours, then C<%overrides> (a value of undef drops the setting).

=cut

sub settings
{
	my (%overrides) = @_;
	my %conf = (
		wal_level => 'logical',
		shared_preload_libraries => 'delta_join',
		max_replication_slots => '10',
		max_worker_processes => '16',);
	$conf{output_plugin_libraries} = 'pgoutput, test_decoding, delta_join'
	  if has_output_plugin_libraries();

	while (my ($name, $value) = each %overrides)
	{
		if (defined $value)
		{
			$conf{$name} = $value;
		}
		else
		{
			delete $conf{$name};
		}
	}
	return \%conf;
}

=pod

=item %parallel_apply

Settings that make every batch of a view that can be shared go to parallel
apply: the worker and two helpers, whatever the number of CPUs and however
few keys the batch has.  For C<conf =E<gt> { %DeltaJoinTest::parallel_apply }>.

=cut

our %parallel_apply = (
	'delta_join.apply_workers' => '3',
	'delta_join.parallel_apply_min_keys' => '1',);

=pod

=item init_node($name, conf => { ... })

A new C<PostgreSQL::Test::Cluster>, initialised for logical decoding with the
delta_join settings (see C<settings>), not started.

=cut

sub init_node
{
	my ($name, %params) = @_;
	my $conf = settings(%{ $params{conf} // {} });

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(allows_streaming => 'logical');

	# settings appended last win over what init() wrote
	my $text = "\n# delta_join test settings\n";
	foreach my $setting (sort keys %$conf)
	{
		(my $value = $conf->{$setting}) =~ s/'/''/g;
		$text .= "$setting = '$value'\n";
	}
	$node->append_conf('postgresql.conf', $text);
	return $node;
}

=pod

=item new_node($name, conf => { ... }, extension => 1)

Like C<init_node>, then starts the server and, unless C<extension> is false,
runs C<CREATE EXTENSION delta_join> in database postgres.

=cut

sub new_node
{
	my ($name, %params) = @_;
	my $node = init_node($name, %params);

	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION delta_join')
	  if $params{extension} // 1;
	return $node;
}

=pod

=item orders_items($node, $dbname)

Creates the worked example of DESIGN.md §1 in database C<$dbname>
(default postgres): C<orders> and C<items>, with a few rows.  The queries
of its two views are C<$DeltaJoinTest::wide_query> (the join) and
C<$DeltaJoinTest::summary_query> (the aggregate).

=cut

our $wide_query =
  'SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount '
  . 'FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id';
our $summary_query =
  'SELECT merchant_id, count(*) AS order_count, sum(amount) AS total_amount '
  . 'FROM orders GROUP BY merchant_id';

sub orders_items
{
	my ($node, $dbname) = @_;
	$node->safe_psql(
		$dbname // 'postgres', q{
		CREATE TABLE orders (
			merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2),
			PRIMARY KEY (merchant_id, item_id, order_id));
		CREATE TABLE items (
			merchant_id bigint, item_id bigint, item_name text,
			PRIMARY KEY (merchant_id, item_id));
		INSERT INTO items SELECT m, i, 'item ' || i
		  FROM generate_series(1, 3) m, generate_series(1, 10) i;
		INSERT INTO orders SELECT m, 1 + o % 10, o, o
		  FROM generate_series(1, 3) m, generate_series(1, 100) o;});
}

=pod

=item differs($node, $target, $query, $dbname)

The number of rows of the target and of the query's result that the other
lacks, counting duplicates: 0 when the target equals its query.

=cut

sub differs
{
	my ($node, $target, $query, $dbname) = @_;
	return $node->safe_psql(
		$dbname // 'postgres', qq{
		SELECT count(*) FROM (
			(TABLE $target EXCEPT ALL ($query))
			UNION ALL
			(($query) EXCEPT ALL TABLE $target)) d});
}

=pod

=back

=cut

1;
