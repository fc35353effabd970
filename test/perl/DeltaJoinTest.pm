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

=back

=cut

1;
