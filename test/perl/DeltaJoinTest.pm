=pod

=head1 NAME

DeltaJoinTest - servers, the worked example and the one comparison of a
target with its query, for the delta_join TAP tests

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

  # orders and items of DESIGN.md §1, with rows
  DeltaJoinTest::worked_example($node);

  # the target holds its query's result, under every plan
  DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query, 'after writes');
  DeltaJoinTest::target_ok($node, 'wide', $query, 'after deletes', mode => 'upsert');

=head1 DESCRIPTION

A delta_join server needs C<wal_level = logical>, the library in
C<shared_preload_libraries> and, on servers that have the parameter
(PostgreSQL 15.20 and later minors), C<delta_join> in
C<output_plugin_libraries>.  Those settings, and the others every test
server gets, are written once, in F<test/server_conf.sh>; this module reads
them from there.

C<target_ok> is the one check that a target holds its query's result
(DESIGN.md §6.1), and a plan oracle: it runs the query under several
plans and requires every plan to give the same answer.  The pg_regress
tests' C<diff()> (F<sql/include/setup.sql>) does the same.

Tests find this module through C<PROVE_FLAGS = -I test/perl> (the Makefile).

=cut

package DeltaJoinTest;

use strict;
use warnings;

use Fcntl qw(:flock);
use File::Basename qw(dirname);
use File::Path qw(rmtree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# test/server_conf.sh, beside this module's folder
my $server_conf = dirname(__FILE__) . '/../server_conf.sh';

# Cached output of test/server_conf.sh
my %server_conf;

# A test that hangs fails instead of holding up the whole run: after
# DELTA_JOIN_TEST_TIMEOUT seconds (600; the longest test takes 80 here) it
# records a failure and exits, and PostgreSQL::Test::Cluster's END block
# stops its servers.  It exits rather than dies, which an eval of the test
# (a retry loop) would catch.
my $test_timeout = $ENV{DELTA_JOIN_TEST_TIMEOUT} // 600;
$SIG{ALRM} = sub {
	fail("the test ran for more than $test_timeout s: stopped");
	exit 1;
};
alarm($test_timeout);

=pod

=head1 SERVERS

=over

=item settings(%overrides)

The postgresql.conf settings of a delta_join test server, as a hash
reference: those of F<test/server_conf.sh> for the server on PATH, then
C<%overrides> (a value of undef drops the setting).

=cut

sub settings
{
	my (%overrides) = @_;

	if (!%server_conf)
	{
		my ($stdout, $stderr) = run_command([ 'sh', $server_conf, 'postgres' ]);
		foreach my $line (split /\n/, $stdout)
		{
			my ($name, $value) = $line =~ /^(\S+) = '(.*)'$/
			  or die "unexpected line from $server_conf: $line";
			$server_conf{$name} = $value;
		}
		die "$server_conf printed no setting: $stderr" unless %server_conf;
	}

	my %conf = %server_conf;
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

=item has_output_plugin_libraries()

True when the server on PATH has the C<output_plugin_libraries> parameter
(F<test/server_conf.sh> sets it only then).

=cut

sub has_output_plugin_libraries
{
	return exists settings()->{output_plugin_libraries};
}

=pod

=item citus_pkglibdir()

The folder F<citus.so> is in when Citus is installed in the server on PATH,
else undef.  C<make test> builds Citus while the tests that do not need it
run, and names in C<DJ_CITUS_DONE> the file the build writes its exit
status to when it ends: that is waited for first (at most
C<DJ_CITUS_WAIT> seconds, 1800), the test's own time limit stopped
meanwhile and started again after.

=cut

sub citus_pkglibdir
{
	my $done = $ENV{DJ_CITUS_DONE} // '';
	if ($done ne '' && !-e $done)
	{
		my $wait = $ENV{DJ_CITUS_WAIT} // 1800;

		note "waiting for make test to build Citus";
		alarm(0);
		for (my $s = 0; $s < $wait && !-e $done; $s++)
		{
			sleep 1;
		}
		alarm($test_timeout);
	}
	my $pkglibdir = `pg_config --pkglibdir`;
	chomp $pkglibdir;
	return -f "$pkglibdir/citus.so" ? $pkglibdir : undef;
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

# The data folder initdb made once for this run of the TAP suite, which
# each new server copies instead of running initdb (as PostgreSQL 17's own
# tests do with INITDB_TEMPLATE): initdb is the largest part of a test
# server's start, and each TAP file starts one server or more.  Made by the
# first test that needs it, under a lock the parallel files share, in
# tmp_check, which prove_installcheck empties before each run.
sub _initdb_template
{
	my $template = "$PostgreSQL::Test::Utils::tmp_check/initdb_template";

	open my $lock, '>', "$template.lock" or die "could not open $template.lock: $!";
	flock($lock, LOCK_EX) or die "could not lock $template.lock: $!";
	if (!-d $template)
	{
		rmtree("$template.part");
		PostgreSQL::Test::Utils::system_or_bail('initdb', '-D', "$template.part",
			'-A', 'trust', '-N');
		rename("$template.part", $template) or die "could not rename $template.part: $!";
	}
	close $lock;
	return $template;
}

# $node->init(allows_streaming => 'logical'), the data folder copied from
# _initdb_template.  PostgreSQL 17 and later copy it themselves when
# INITDB_TEMPLATE names it; on 15 the call of initdb that init makes
# (initdb -D <folder> -A trust -N, with no other argument) is replaced by
# the copy, the way 17 makes it.
sub _init_from_template
{
	my ($node) = @_;
	my $template = _initdb_template();

	if ($node->pg_version >= 17)
	{
		local $ENV{INITDB_TEMPLATE} = $template;
		$node->init(allows_streaming => 'logical');
		return;
	}

	my $system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;
	no warnings 'redefine';
	local *PostgreSQL::Test::Utils::system_or_bail = sub {
		my @command = @_;
		if (@command == 6 && $command[0] eq 'initdb' && $command[1] eq '-D'
			&& "@command[3 .. 5]" eq '-A trust -N')
		{
			@command = ('cp', '-RPp', $template, $command[2]);
		}
		return $system_or_bail->(@command);
	};
	$node->init(allows_streaming => 'logical');
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
	_init_from_template($node);

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

=item seeds($node, @seeds)

The seeds a randomized test runs on C<$node>'s major, in their order: all
of them on PostgreSQL 15, and on each later major about half of them, a
different half on 17 than on 18 (the seeds at odd positions of C<@seeds>
on 17, at even positions on 18), so that CI, which runs every major,
still runs every seed on 15 and on one later major.  C<DJ_ALL_SEEDS=1> in
the environment runs all of them on every major.

A test must not depend on which of its seeds run: what it does after its
loop over the seeds uses the seeds that ran (the first or the last of
them).  Whatever a test binds to a seed (the differential tests turn
set-based apply off for the seed at position 1 of C<@seeds>) stays bound
to it on every major, so that a seed that fails on one major runs the
same way on 15.

=cut

sub seeds
{
	my ($node, @seeds) = @_;
	my $major = $node->pg_version->major;

	return @seeds if $major == 15 || $ENV{DJ_ALL_SEEDS} || @seeds < 2;
	return @seeds[ grep { ($_ + $major) % 2 == 0 } 0 .. $#seeds ];
}

=pod

=back

=head1 THE WORKED EXAMPLE

=over

=item worked_example($node, %options)

Creates the tables of DESIGN.md §1:

  orders (merchant_id, item_id, order_id, amount numeric(18,2) [, note text])
    primary key (merchant_id, item_id, order_id)
  items (merchant_id, item_id, item_name text [, price numeric(12,3)])
    primary key (merchant_id, item_id)

and, with C<users_domains>, its second example:

  users (id primary key, firstname, lastname)
  domains (id primary key, user_id, domain_name), an index on user_id

Options: C<dbname> (default postgres); C<schema> to create them in (it is
created too; default: the first schema of the search path);
C<orders_items> (default true) and C<users_domains> (default false): which
tables; C<note> and C<price>: the optional columns; C<merchants>
(default 3), C<items> (per merchant, default 10) and C<orders> (per
merchant, default 100): the rows of orders and items, C<item I> for item
I and order O of each merchant with item C<1 + O % items> and amount O;
C<rows =E<gt> 0> creates the tables empty (users and domains are always
created empty).  The queries of the example's two views are
C<$DeltaJoinTest::wide_query> (the join) and
C<$DeltaJoinTest::summary_query> (the aggregate).

=cut

our $wide_query =
  'SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount '
  . 'FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id';
our $summary_query =
  'SELECT merchant_id, count(*) AS order_count, sum(amount) AS total_amount '
  . 'FROM orders GROUP BY merchant_id';

sub worked_example
{
	my ($node, %opts) = @_;
	my $s = defined $opts{schema} ? "$opts{schema}." : '';
	my $sql = defined $opts{schema} ? "CREATE SCHEMA $opts{schema};\n" : '';

	if ($opts{orders_items} // 1)
	{
		my $note = $opts{note} ? ",\n  note text" : '';
		my $price = $opts{price} ? ",\n  price numeric(12,3)" : '';
		$sql .= qq{CREATE TABLE ${s}orders (
  merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2)$note,
  PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE ${s}items (
  merchant_id bigint, item_id bigint, item_name text$price,
  PRIMARY KEY (merchant_id, item_id));
};
		if ($opts{rows} // 1)
		{
			my $merchants = $opts{merchants} // 3;
			my $items = $opts{items} // 10;
			my $orders = $opts{orders} // 100;
			$sql .= qq{INSERT INTO ${s}items (merchant_id, item_id, item_name)
  SELECT m, i, 'item ' || i FROM generate_series(1, $merchants) m, generate_series(1, $items) i;
INSERT INTO ${s}orders (merchant_id, item_id, order_id, amount)
  SELECT m, 1 + o % $items, o, o FROM generate_series(1, $merchants) m, generate_series(1, $orders) o;
};
		}
	}
	if ($opts{users_domains})
	{
		$sql .= qq{CREATE TABLE ${s}users (id bigint PRIMARY KEY, firstname text, lastname text);
CREATE TABLE ${s}domains (id bigint PRIMARY KEY, user_id bigint, domain_name text);
CREATE INDEX ON ${s}domains (user_id);
};
	}
	$node->safe_psql($opts{dbname} // 'postgres', $sql);
}

=pod

=back

=head1 DOES THE TARGET HOLD ITS QUERY'S RESULT?

=over

=item @plans

The plans every query is run under, as C<[ label, { setting =E<gt> value } ]>:
the session's own, then each kind of plan node turned off in turn, then
parallel plans forced and none.  The same list as C<dj_plans()> of
F<sql/include/setup.sql>.  JIT is off for all (a node turned off costs
1e10, far above C<jit_above_cost>, and compiling would cost more than
running; JIT changes no result).

=cut

our @plans = (
	[ 'as planned', {} ],
	[ 'enable_hashagg = off', { enable_hashagg => 'off' } ],
	[ 'enable_sort = off', { enable_sort => 'off' } ],
	[ 'enable_seqscan = off', { enable_seqscan => 'off' } ],
	[ 'enable_nestloop = off', { enable_nestloop => 'off' } ],
	[ 'enable_hashjoin = off', { enable_hashjoin => 'off' } ],
	[ 'enable_mergejoin = off', { enable_mergejoin => 'off' } ],
	[
		'parallel plans forced',
		{
			parallel_setup_cost => '0',
			parallel_tuple_cost => '0',
			min_parallel_table_scan_size => '0',
			max_parallel_workers_per_gather => '2'
		}
	],
	[ 'no parallel plan', { max_parallel_workers_per_gather => '0' } ]);

=pod

=item $oracle_rows

A target of more rows than this (50,000) is compared under the first plan
of C<@plans> only.  The other plans are there to catch a query whose result
depends on the plan (create_view must refuse it), which shows on a few rows
as well as on many; repeating the comparison of a large result under each of
them took 50 of the 85 s of one test run alone (026: 900,000 rows compared
nine times, three of them with parallel workers).

=cut

our $oracle_rows = 50_000;

=pod

=item target_diff($node, $target, $query, %options)

Compares the target with the result of its query as multisets (EXCEPT ALL
both ways, so duplicates count), under every plan of C<@plans> (the first
only for a target of more than C<$oracle_rows> rows), all in one
REPEATABLE READ transaction: every plan reads the same rows.  Returns a
hash reference of counts under the first plan:

=over

=item C<missing>: rows of the query the target lacks;

=item C<extra>: rows of the target the query does not return;

=item C<live_extra> (mode upsert): the keys of those of them that the
query returns with other values -- not residual rows: stale ones;

=item C<beside> (with C<sides>): the preserved keys that have a
null-extended row of the target beside a joined row ("order 7, no item"
next to "order 7, item 3");

=item C<shadowed> (with C<sides>): the preserved keys of missing rows that
are null-extended rows and have a joined row in the target (a residual
joined row left in place of the null-extended row: a likely cause of
C<missing>);

=item C<qrows>, C<trows>: rows of the query and of the target;

=back

and C<dependent>: the labels of the plans whose result compares otherwise
with the target (missing, extra, live_extra or the number of rows):
empty unless the query's result depends on the plan.  C<plans> holds each
plan's counts as text, for diagnostics.

Options:

=over

=item C<dbname> (default postgres);

=item C<mode>: C<exact> (default) or C<upsert>, where a deleted source row
leaves its earlier rows in the target ("residual rows", DESIGN.md §2);

=item C<key> (mode upsert): the columns that name a row's source rows
(default: those of the target's primary key, else of its first unique
index).  An extra row whose key the query still returns is stale, not
residual;

=item C<sides> (outer joins): C<[ [ [ preserved columns ], partner column ], ... ]>:
a row is null-extended on that side when the partner column is NULL and
the first preserved column is not (a FULL JOIN has two sides);

=item C<sub_rows> (chains of outer joins, where a row may be null-extended
at several joins): C<[ columns ]> that carry the key of every source;
C<beside> then counts the rows of the target that are a sub-row of
another: the other holds every one of those columns the row holds, with
the same value, and more of them ("a 1, no b" next to "a 1, b 7, no c");

=item C<as_text>: compare the rows' text forms (C<1.0> and C<1.00> are then
different rows).

=back

=cut

# The columns of the target's primary key, else of its first unique index
sub _target_key
{
	my ($node, $dbname, $target) = @_;
	my $cols = $node->safe_psql(
		$dbname, qq{
		SELECT string_agg(quote_ident(a.attname), ',' ORDER BY k.n)
		FROM (SELECT indexrelid, indkey FROM pg_index
		      WHERE indrelid = '$target'::regclass AND indisunique AND indpred IS NULL
		      ORDER BY indisprimary DESC, indexrelid LIMIT 1) i,
		     unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
		JOIN pg_attribute a ON a.attrelid = '$target'::regclass AND a.attnum = k.attnum});
	die "target $target has no primary key or unique index: give key => [ ... ]"
	  if $cols eq '';
	return [ split /,/, $cols ];
}

# One target's comparison script: a REPEATABLE READ transaction whose
# every output line is "$n|plan label|missing|extra|live_extra|qrows|trows|beside|shadowed"
sub _diff_script
{
	my ($node, $n, $target, $query, %opts) = @_;
	my $dbname = $opts{dbname} // 'postgres';
	my $mode = $opts{mode} // 'exact';
	die "unknown mode $mode" unless $mode eq 'exact' || $mode eq 'upsert';
	die 'as_text compares whole rows: it has no key for mode upsert'
	  if $opts{as_text} && $mode eq 'upsert';

	# the query goes inside a CTE
	$query =~ s/;\s*$//;
	my ($q, $t) =
	  $opts{as_text}
	  ? ("SELECT r::text AS r FROM ($query) r", "SELECT r::text AS r FROM $target r")
	  : ($query, "TABLE $target");

	# Keys are compared with set operations (INTERSECT), which take NULLs
	# for equal, as IS NOT DISTINCT FROM does, but hash or sort: a join on
	# IS NOT DISTINCT FROM compares every row with every row.
	my $live_extra = '0';
	if ($mode eq 'upsert')
	{
		my $key = join(', ', @{ $opts{key} // _target_key($node, $dbname, $target) });
		$live_extra = "(SELECT count(*) FROM (SELECT $key FROM dj_extra "
		  . "INTERSECT SELECT $key FROM dj_query) k)";
	}

	# target-only counts: the first plan's statement computes them
	my ($beside, $shadowed) = ('0', '0');
	if ($opts{sides})
	{
		my (@beside, @shadowed);
		foreach my $side (@{ $opts{sides} })
		{
			my ($preserved, $partner) = @$side;
			my $p = join(', ', @$preserved);
			my $null_extended = "$partner IS NULL AND $preserved->[0] IS NOT NULL";
			my $joined = "SELECT $p FROM dj_target WHERE $partner IS NOT NULL";
			push @beside, "(SELECT count(*) FROM (SELECT $p FROM dj_target WHERE $null_extended "
			  . "INTERSECT $joined) k)";
			push @shadowed, "(SELECT count(*) FROM (SELECT $p FROM dj_missing WHERE $null_extended "
			  . "INTERSECT $joined) k)";
		}
		$beside = join(' + ', @beside);
		$shadowed = join(' + ', @shadowed);
	}
	elsif ($opts{sub_rows})
	{
		my @cols = @{ $opts{sub_rows} };
		my $held = sub {
			my ($x) = @_;
			return '(' . join(' + ', map { "($x.$_ IS NOT NULL)::int" } @cols) . ')';
		};
		$beside = '(SELECT count(*) FROM dj_target r WHERE EXISTS (SELECT FROM dj_target j WHERE '
		  . join(' AND ', map { "(r.$_ IS NULL OR r.$_ = j.$_)" } @cols)
		  . ' AND ' . $held->('j') . ' > ' . $held->('r') . '))';
	}

	# the plans after the first run only for a target of at most
	# $oracle_rows rows, counted in the comparison's snapshot
	my $script = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;\nSET LOCAL jit = off;\n"
	  . "SELECT count(*) <= $oracle_rows AS dj_every_plan FROM $target \\gset\n";
	foreach my $i (0 .. $#plans)
	{
		my ($label, $set) = @{ $plans[$i] };
		$script .= "\\if :dj_every_plan\n" if $i == 1;
		$script .= "SET LOCAL $_ = '$set->{$_}';\n" foreach sort keys %$set;
		$script .= qq{WITH dj_query AS MATERIALIZED ($q), dj_target AS MATERIALIZED ($t),
     dj_missing AS MATERIALIZED (TABLE dj_query EXCEPT ALL TABLE dj_target),
     dj_extra AS MATERIALIZED (TABLE dj_target EXCEPT ALL TABLE dj_query)
SELECT $n, '$label', (SELECT count(*) FROM dj_missing), (SELECT count(*) FROM dj_extra),
       $live_extra, (SELECT count(*) FROM dj_query), (SELECT count(*) FROM dj_target), }
		  . ($i == 0 ? "$beside, $shadowed" : '0, 0') . ";\n";
		$script .= "SET LOCAL $_ TO DEFAULT;\n" foreach sort keys %$set;
	}
	$script .= "\\endif\n" if @plans > 1;
	$script .= "COMMIT;\n";
	return $script;
}

sub target_diff
{
	my ($node, $target, $query, %opts) = @_;
	return target_diffs($node, [ [ $target, $query, %opts ] ])->[0];
}

=pod

=item target_diffs($node, [ [ $target, $query, %options ], ... ])

C<target_diff> of several targets, in one psql session (the server's
work is the same: each target is compared in a transaction of its own;
only the client's start-up is saved).  All of them in one database.
Returns a reference to the list of their counts, in order.

=cut

sub target_diffs
{
	my ($node, $checks) = @_;
	# the options of each check
	my @opts = map { +{ @$_[ 2 .. $#$_ ] } } @$checks;
	my %dbnames = map { (($_->{dbname} // 'postgres') => 1) } @opts;
	die 'target_diffs: every target in one database' if keys %dbnames != 1;
	my ($dbname) = keys %dbnames;

	my $script = '';
	$script .= _diff_script($node, $_, @{ $checks->[$_] }) foreach 0 .. $#$checks;
	my @c = map { +{ plans => {}, dependent => [] } } @$checks;
	my @first;
	foreach my $line (split /\n/, $node->safe_psql($dbname, $script))
	{
		my ($n, $label, $m, $e, $le, $qn, $tn, $bs, $sh) = split /\|/, $line;
		my $c = $c[$n];
		my $upsert = ($opts[$n]{mode} // 'exact') eq 'upsert';
		my $counts = "$qn rows, $m of them missing from the target, $e rows of the target "
		  . "not among them" . ($upsert ? " ($le keys of them the query returns)" : '');
		$c->{plans}{$label} = $counts;
		if (!defined $first[$n])
		{
			$first[$n] = $counts;
			@$c{qw(missing extra live_extra qrows trows beside shadowed)} =
			  ($m, $e, $le, $qn, $tn, $bs, $sh);
		}
		elsif ($counts ne $first[$n])
		{
			push @{ $c->{dependent} }, $label;
		}
	}
	foreach my $n (0 .. $#c)
	{
		# the first plan's count of the target's rows is the one the
		# script's choice of plans read
		my $expected = $c[$n]{trows} > $oracle_rows ? 1 : @plans;
		die "target_diff: expected $expected plans for $checks->[$n][0], got "
		  . scalar(keys %{ $c[$n]{plans} })
		  unless keys %{ $c[$n]{plans} } == $expected;
	}
	return \@c;
}

=pod

=item target_ok($node, $target, $query, $name, %options)

Asserts that the target holds its query's result (options as for
C<target_diff>):

=over

=item the query's result does not depend on the plan: every plan of
C<@plans> compares alike with the target.  A query whose result does is a
determinism bug (create_view must refuse it), reported as such, apart from
a target that differs from its query;

=item mode exact: the target equals the query's result;

=item mode upsert: every row of the query is in the target, and every
extra row is residual (its key is no longer in the query); with C<sides>,
no null-extended row sits beside a joined row of the same preserved key.

=back

On failure, shows the counts, some differing rows and the views' status.
Returns the counts of C<target_diff>.

=cut

sub target_ok
{
	my ($node, $target, $query, $name, %opts) = @_;
	return _target_report($node, $target, $query, $name,
		target_diff($node, $target, $query, %opts), %opts);
}

=pod

=item targets_ok($node, $name, [ [ $target, $query, %options ], ... ])

C<target_ok> of each target, in order, with the same assertions and
diagnostics; their comparisons run in one psql session
(C<target_diffs>).  An option C<name> of a check names it instead of
C<$name>.  Returns a reference to the list of their counts.

=cut

sub targets_ok
{
	my ($node, $name, $checks) = @_;
	my $diffs = target_diffs($node, $checks);
	return [
		map {
			my ($target, $query, %opts) = @{ $checks->[$_] };
			_target_report($node, $target, $query, delete $opts{name} // $name,
				$diffs->[$_], %opts)
		} 0 .. $#$checks
	];
}

# target_ok's assertion and diagnostics, for the counts $c of target_diff
sub _target_report
{
	my ($node, $target, $query, $name, $c, %opts) = @_;
	my $dbname = $opts{dbname} // 'postgres';
	my $upsert = ($opts{mode} // 'exact') eq 'upsert';
	$query =~ s/;\s*$//;

	my $holds =
	  $upsert
	  ? $c->{missing} == 0 && $c->{live_extra} == 0 && $c->{beside} == 0
	  : $c->{missing} == 0 && $c->{extra} == 0;
	my $what =
	  $upsert
	  ? "every row of its query is in $target, every extra row is residual ($c->{extra})"
	  : "$target equals its query";
	my $under = keys %{ $c->{plans} } == @plans ? 'every plan' : 'as planned';
	return $c if ok($holds && !@{ $c->{dependent} }, "$name: $what ($c->{qrows} rows, $under)");

	if (@{ $c->{dependent} })
	{
		diag("the query's result depends on the plan (a determinism bug: create_view "
			  . "must refuse such a query); compared with $target ($c->{trows} rows):\n"
			  . join("\n", map { "  $_->[0]: $c->{plans}{$_->[0]}" } @plans));
	}
	if (!$holds)
	{
		diag("the target differs from its query: target $c->{trows} rows, query "
			  . "$c->{qrows} rows; $c->{missing} missing, $c->{extra} extra"
			  . ($upsert ? " ($c->{live_extra} of them not residual)" : '')
			  . ($opts{sides} ? "; $c->{beside} null-extended beside joined, $c->{shadowed} "
				  . "of the missing rows null-extended with a joined row of their preserved key "
				  . "in the target" : ''));
		my ($q, $t) =
		  $opts{as_text}
		  ? ("SELECT r::text FROM ($query) r", "SELECT r::text FROM $target r")
		  : ($query, "TABLE $target");
		diag(
			$node->safe_psql(
				$dbname, qq{
			(SELECT 'missing' AS side, d::text FROM (($q) EXCEPT ALL $t) d LIMIT 10)
			UNION ALL
			(SELECT 'extra', d::text FROM ($t EXCEPT ALL ($q)) d LIMIT 10)}));
	}
	diag(status_text($node, $dbname));
	return $c;
}

=pod

=item dump_restore($node, $from, $to, $name)

pg_dump of database C<$from> (plain SQL), restored with psql into a new
database C<$to> of the same node: two tests, named after C<$name>.

=cut

sub dump_restore
{
	my ($node, $from, $to, $name) = @_;
	my $dump = $node->basedir . "/$from.sql";

	command_ok([ 'pg_dump', '-d', $node->connstr($from), '-f', $dump ], "$name: pg_dump");
	$node->safe_psql('postgres', "CREATE DATABASE $to");
	command_ok(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($to), '-f', $dump ],
		"$name: restored");
	return;
}

=pod

=item status_text($node, $dbname)

C<delta_join.status> as text, for diagnostics.

=cut

sub status_text
{
	my ($node, $dbname) = @_;
	my ($ret, $out, $err) = $node->psql($dbname // 'postgres',
		'SELECT * FROM delta_join.status ORDER BY target',
		extra_params => [ '-x' ]);
	return "delta_join.status:\n$out$err";
}

=pod

=item explain_text($node, $query, $strategy)

What C<delta_join.explain()> says of C<$query> (with C<$strategy>, when
given), its lines joined by newlines.

=cut

sub explain_text
{
	my ($node, $query, $strategy) = @_;
	my $with = defined $strategy ? ", strategy => '$strategy'" : '';
	return $node->safe_psql('postgres',
		"SELECT string_agg(line, E'\\n') FROM delta_join.explain(\$q\$ $query \$q\$$with) AS line");
}

=pod

=item cancel_client($node, $text)

Cancel the client sessions (not the background workers) whose running
statement contains C<$text>, other than the one asking.

=cut

sub cancel_client
{
	my ($node, $text) = @_;
	(my $pattern = $text) =~ s/'/''/g;
	$node->safe_psql(
		'postgres', qq{
		SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND query LIKE '%$pattern%'
		  AND pid <> pg_backend_pid()});
}

=pod

=back

=cut

# A server that crashed and shut down (the test framework turns
# restart_after_crash off) must fail its test file, not the whole run:
# PostgreSQL::Test::Cluster's own END block stops every node it started,
# and BAIL_OUTs when pg_ctl cannot stop one, which ends prove for every
# other file too.  This END block runs first (it is compiled after the
# framework's) and stops the nodes itself, a failure failing the file.
# (Whether the postmaster still runs cannot be told beforehand: until its
# parent reaps it, a dead one is a zombie, which kill 0 finds.)
END
{
	my $exit_code = $?;

	foreach my $node (@PostgreSQL::Test::Cluster::all_nodes)
	{
		next if !defined $node->{_pid} || $node->stop('immediate', fail_ok => 1);
		diag('server "' . $node->name . '" could not be stopped: it crashed (see '
			  . $node->logfile . ')');
		$node->{_pid} = undef;
		$exit_code ||= 1;
	}
	$? = $exit_code;
}

1;
