=pod

=head1 NAME

DeltaJoinWorkload - seeded write workloads and result comparisons for the
delta_join differential and crash TAP tests

=head1 SYNOPSIS

  use DeltaJoinWorkload;

  # pgbench scripts, written once into a temporary folder
  my $scripts = DeltaJoinWorkload::write_scripts(
	  upsert => [ 4, "INSERT INTO ..." ],
	  update => [ 3, "UPDATE ..." ]);

  # seeded concurrent writes, in the foreground...
  my $res = DeltaJoinWorkload::pgbench($node, $scripts,
	  seed => 17, clients => 4, transactions => 500);
  # ... or in the background (stream), ended by pgbench_finish
  my $h = DeltaJoinWorkload::pgbench_start($node, $scripts,
	  seed => 17, clients => 3, seconds => 5);
  my $res = DeltaJoinWorkload::pgbench_finish($h);

  ok(DeltaJoinWorkload::wait_views($node), 'wait() returns true');
  DeltaJoinWorkload::is_view_equal($node, 's.target', $query, 'seed 17');

=head1 DESCRIPTION

The invariant these tests check (DESIGN.md §6.1): after
C<delta_join.wait()>, a view's target equals the result of its query as a
multiset: C<query EXCEPT ALL target> and C<target EXCEPT ALL query> are both
empty.  With deletes on a join source, residual rows are allowed, so only
C<query EXCEPT ALL target> must be empty (C<is_view_superset>).  Outer-join
views in upsert mode have one more rule: no null-extended row beside a
joined row of the same preserved-side row (C<is_outer_upsert>).

Writes come from pgbench custom scripts run by several clients at once;
C<--random-seed> makes each client's sequence of random values repeat from
run to run (the interleaving of the clients does not).  pgbench retries a
transaction that hits a deadlock (C<--max-tries>), so scripts need not
order their locks perfectly.

=cut

package DeltaJoinWorkload;

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

=pod

=head1 FUNCTIONS

=over

=item write_scripts(name => [ weight, text ], ...)

Writes each script into a new temporary folder; returns a reference to a
list of C<file@weight> arguments for pgbench's C<-f>.

=cut

sub write_scripts
{
	my (%scripts) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir('pgbench');
	my @files;
	foreach my $name (sort keys %scripts)
	{
		my ($weight, $text) = @{ $scripts{$name} };
		my $file = "$dir/$name.sql";
		open my $fh, '>', $file or die "could not write $file: $!";
		print $fh $text;
		close $fh;
		push @files, "$file\@$weight";
	}
	return \@files;
}

# the pgbench command line
sub _pgbench_command
{
	my ($node, $scripts, %opts) = @_;
	my $clients = $opts{clients} // 4;
	my @cmd = (
		'pgbench', '-n',
		'-h', $node->host,
		'-p', $node->port,
		'-c', $clients,
		'-j', $clients,
		"--random-seed=" . ($opts{seed} // 1),
		'--max-tries=' . ($opts{max_tries} // 20));
	push @cmd, '-t', $opts{transactions} if defined $opts{transactions};
	push @cmd, '-T', $opts{seconds} if defined $opts{seconds};
	push @cmd, '-R', $opts{rate} if defined $opts{rate};
	push @cmd, map { ('-f', $_) } @$scripts;
	push @cmd, $opts{dbname} // 'postgres';
	return \@cmd;
}

=pod

=item pgbench_start($node, $scripts, seed => N, clients => N, transactions => N | seconds => N)

Starts pgbench in the background; returns a handle for C<pgbench_finish>.

=cut

sub pgbench_start
{
	my ($node, $scripts, %opts) = @_;
	my %h = (stdout => '', stderr => '', started => time());
	$h{cmd} = _pgbench_command($node, $scripts, %opts);
	$h{run} = IPC::Run::start($h{cmd}, '<', \undef, '>', \$h{stdout},
		'2>', \$h{stderr});
	return \%h;
}

=pod

=item pgbench_finish($handle)

Waits for a background pgbench; returns a hash reference: C<rc> (its exit
status), C<stdout>, C<stderr>, C<processed> (transactions pgbench counted as
done), C<failed> (transactions that failed after every try), C<seconds>.

=cut

sub pgbench_finish
{
	my ($h) = @_;
	$h->{run}->finish;
	my %res = (
		rc => $h->{run}->result(0) // -1,
		stdout => $h->{stdout},
		stderr => $h->{stderr},
		seconds => time() - $h->{started});
	($res{processed}) =
	  $h->{stdout} =~ /number of transactions actually processed: (\d+)/;
	($res{failed}) = $h->{stdout} =~ /number of failed transactions: (\d+)/;
	$res{processed} //= 0;
	$res{failed} //= 0;
	return \%res;
}

=pod

=item pgbench($node, $scripts, %opts)

C<pgbench_start> then C<pgbench_finish>.

=cut

sub pgbench
{
	my ($node, $scripts, %opts) = @_;
	return pgbench_finish(pgbench_start($node, $scripts, %opts));
}

=pod

=item pgbench_ok($node, $scripts, $name, %opts)

Runs pgbench in the foreground and asserts that it exited with 0 and that
no transaction failed; returns the result of C<pgbench_finish>.

=cut

sub pgbench_ok
{
	my ($node, $scripts, $name, %opts) = @_;
	my $res = pgbench($node, $scripts, %opts);
	ok($res->{rc} == 0 && $res->{failed} == 0 && $res->{processed} > 0,
		"$name: pgbench ran $res->{processed} transactions, none failed")
	  or diag("pgbench exit status $res->{rc}\n$res->{stdout}\n$res->{stderr}");
	return $res;
}

=pod

=item wait_views($node, $target, $timeout)

C<SELECT delta_join.wait(...)>; true when it returned true.  C<$target>
undef waits for every view; C<$timeout> is an interval (default 30s).

=cut

sub wait_views
{
	my ($node, $target, $timeout) = @_;
	my $t = defined $target ? "'$target'" : 'NULL';
	my $to = $timeout // '30s';
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT delta_join.wait($t, '$to')");
	diag("delta_join.wait: $err") if $ret != 0;
	return $ret == 0 && $out eq 't';
}

=pod

=item diff_counts($node, $target, $query)

Returns (rows of the query missing from the target, rows of the target the
query does not return, rows of the target, rows of the query), counting
duplicates (EXCEPT ALL).

=cut

sub diff_counts
{
	my ($node, $target, $query) = @_;
	my $out = $node->safe_psql(
		'postgres', qq{
		SELECT (SELECT count(*) FROM (($query) EXCEPT ALL TABLE $target) d),
		       (SELECT count(*) FROM (TABLE $target EXCEPT ALL ($query)) d),
		       (SELECT count(*) FROM $target),
		       (SELECT count(*) FROM ($query) q)});
	return split /\|/, $out;
}

# a few rows of each difference, for diagnostics
sub _diff_sample
{
	my ($node, $target, $query) = @_;
	return $node->safe_psql(
		'postgres', qq{
		(SELECT 'missing' AS side, d::text FROM (($query) EXCEPT ALL TABLE $target) d LIMIT 10)
		UNION ALL
		(SELECT 'extra', d::text FROM (TABLE $target EXCEPT ALL ($query)) d LIMIT 10)});
}

=pod

=item is_view_equal($node, $target, $query, $name)

Asserts that the target equals the query's result (EXCEPT ALL both ways
empty); on failure shows some differing rows and the view's status.
Returns the number of rows of the target.

=cut

sub is_view_equal
{
	my ($node, $target, $query, $name) = @_;
	my ($missing, $extra, $trows, $qrows) =
	  diff_counts($node, $target, $query);
	ok($missing == 0 && $extra == 0,
		"$name: $target equals its query ($trows rows)")
	  or diag("$missing rows of the query missing from the target, "
		  . "$extra extra rows in the target; target $trows rows, query $qrows rows\n"
		  . _diff_sample($node, $target, $query) . "\n"
		  . status_text($node));
	return $trows;
}

=pod

=item is_view_superset($node, $target, $query, $name)

Asserts that every row of the query's result is in the target (query
EXCEPT ALL target is empty): what a join view guarantees after deletes,
which leave residual rows.  Returns the number of extra (residual) rows.

=cut

sub is_view_superset
{
	my ($node, $target, $query, $name) = @_;
	my ($missing, $extra, $trows, $qrows) =
	  diff_counts($node, $target, $query);
	ok($missing == 0,
		"$name: every row of the query is in $target ($qrows rows, $extra residual)")
	  or diag("$missing rows of the query missing from the target; "
		  . "target $trows rows, query $qrows rows\n"
		  . _diff_sample($node, $target, $query) . "\n"
		  . status_text($node));
	return $extra;
}

=pod

=item outer_counts($node, $target, $query, combo => [ ... ], sides => [ [ [ ... ], $col ], ... ])

=item outer_counts($node, $target, $query, combo => [ ... ])

Compares the target of an outer-join view with its query (DESIGN.md §2,
"Outer delta joins").  C<combo> names the select-list columns that carry
the key of every source: a row's combination of source rows.  Each entry
of C<sides> is C<[ [ preserved columns ], partner column ]>: a row is
null-extended on that side when the partner column is NULL and the first
preserved column is not (a FULL JOIN has two sides, one each way).
Returns a hash reference of counts:

=over

=item C<missing>: rows of the query the target lacks (EXCEPT ALL);

=item C<shadowed>: those of them that are null-extended rows whose
preserved key has a joined row in the target (a residual joined row left
in place of the null-extended row: a likely cause when C<missing> is not 0);

=item C<extra>: rows of the target the query does not return;

=item C<live_extra>: those of them whose combination of source rows the
query still returns -- not residual rows: the query has that row with other
values;

=item C<beside>: null-extended rows of the target beside a joined row of
the same preserved key ("order 7, no item" next to "order 7, item 3").
Without C<sides> (chains of outer joins, where a row may be null-extended
at several joins): rows of the target that are a sub-row of another --
the other carries every source key the row carries, and more ("a 1, no
b" next to "a 1, b 7, no c", or "a 1, b 7" next to "a 1, b 7, c 30");

=item C<trows>, C<qrows>: rows of the target and of the query.

=back

=cut

# (x.a, x.b) IS NOT DISTINCT FROM (y.a, y.b), for a list of columns
sub _same_cols
{
	my ($l, $r, $cols) = @_;
	return '(' . join(', ', map { "$l.$_" } @$cols) . ') IS NOT DISTINCT FROM ('
	  . join(', ', map { "$r.$_" } @$cols) . ')';
}

# r is a sub-row of another row of t: every combo column r holds, the
# other holds with the same value, and it holds more of them
sub _sub_row
{
	my ($combo) = @_;
	my $nulls = sub {
		my ($x) = @_;
		return '(' . join(' + ', map { "($x.$_ IS NULL)::int" } @$combo) . ')';
	};
	return 'EXISTS (SELECT FROM t j WHERE '
	  . join(' AND ', map { "(r.$_ IS NULL OR r.$_ = j.$_)" } @$combo)
	  . ' AND ' . $nulls->('r') . ' > ' . $nulls->('j') . ')';
}

# the SQL of outer_counts
sub _outer_counts_sql
{
	my ($target, $query, %spec) = @_;
	my @null_beside_joined;
	foreach my $side (@{ $spec{sides} // [] })
	{
		my ($preserved, $partner) = @$side;
		push @null_beside_joined,
		  "(r.$partner IS NULL AND r.$preserved->[0] IS NOT NULL AND EXISTS ("
		  . 'SELECT FROM t j WHERE '
		  . _same_cols('j', 'r', $preserved)
		  . " AND j.$partner IS NOT NULL))";
	}
	my $beside =
	  defined $spec{sides}
	  ? join(' OR ', @null_beside_joined)
	  : _sub_row($spec{combo});
	my $combo = _same_cols('q', 'r', $spec{combo});
	return qq{
		WITH q AS MATERIALIZED ($query),
		     t AS MATERIALIZED (TABLE $target),
		     missing AS MATERIALIZED (TABLE q EXCEPT ALL TABLE t),
		     extra AS MATERIALIZED (TABLE t EXCEPT ALL TABLE q)
		SELECT (SELECT count(*) FROM missing),
		       (SELECT count(*) FROM missing r WHERE $beside),
		       (SELECT count(*) FROM extra),
		       (SELECT count(*) FROM extra r WHERE EXISTS (SELECT FROM q WHERE $combo)),
		       (SELECT count(*) FROM t r WHERE $beside),
		       (SELECT count(*) FROM t),
		       (SELECT count(*) FROM q)};
}

sub outer_counts
{
	my ($node, $target, $query, %spec) = @_;
	my %c;
	@c{qw(missing shadowed extra live_extra beside trows qrows)} = split /\|/,
	  $node->safe_psql('postgres', _outer_counts_sql($target, $query, %spec));
	return \%c;
}

=pod

=item is_outer_upsert($node, $target, $query, $name, combo => [ ... ], sides => [ ... ])

Asserts what an outer-join view in upsert mode guarantees after
C<wait()> (see C<outer_counts>): every row of the query is in the target
(query EXCEPT ALL target is empty, as C<is_view_superset>); every extra row
of the target is residual (the combination of source rows it carries is no
longer in the query); no null-extended row sits beside a joined row of the
same preserved key (without C<sides>: no row is a sub-row of another).
Returns the counts.

=cut

sub is_outer_upsert
{
	my ($node, $target, $query, $name, %spec) = @_;
	my $c = outer_counts($node, $target, $query, %spec);
	my $diag = sub {
		diag("target $c->{trows} rows, query $c->{qrows} rows; $c->{missing} missing "
			  . "($c->{shadowed} of them null-extended rows with a joined row of "
			  . "their preserved key in the target), $c->{extra} extra ($c->{live_extra} "
			  . "of them not residual), $c->{beside} null-extended beside joined\n"
			  . _diff_sample($node, $target, $query) . "\n"
			  . status_text($node));
	};
	ok($c->{missing} == 0,
		"$name: every row of the query is in $target ($c->{qrows} rows)")
	  or $diag->();
	ok($c->{live_extra} == 0,
		"$name: every extra row of $target is residual ($c->{extra})")
	  or $diag->();
	ok($c->{beside} == 0,
		"$name: no null-extended row of $target beside a joined row of its preserved key")
	  or $diag->();
	return $c;
}

=pod

=item status_text($node)

C<delta_join.status> as text, for diagnostics.

=cut

sub status_text
{
	my ($node) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		'SELECT * FROM delta_join.status ORDER BY target',
		extra_params => [ '-x' ]);
	return "delta_join.status:\n$out$err";
}

=pod

=item status_ok($node, $target, $name)

Asserts that the view's state in C<delta_join.status> is active and that it
has seen changes (changes_seen > 0).

=cut

sub status_ok
{
	my ($node, $target, $name) = @_;
	my $row = $node->safe_psql(
		'postgres', qq{
		SELECT state, changes_seen > 0, last_error IS NULL
		FROM delta_join.status WHERE target::regclass = '$target'::regclass});
	is($row, 'active|t|t',
		"$name: $target is active with no error and has seen changes")
	  or diag(status_text($node));
}

=pod

=item check_views($node, \%views, $name)

C<wait()> returns true, then every target of C<%views> (target => query)
equals its query.

=cut

sub check_views
{
	my ($node, $views, $name) = @_;
	ok(wait_views($node), "$name: wait() returns true");
	foreach my $t (sort keys %$views)
	{
		is_view_equal($node, $t, $views->{$t}, $name);
	}
}

=pod

=item poll_until($node, $sql, $seconds)

Runs C<$sql> until it returns C<t>, for at most C<$seconds> (default 20);
true when it did.  Server restarts in between are tolerated.

=cut

sub poll_until
{
	my ($node, $sql, $seconds) = @_;
	my $deadline = time() + ($seconds // 20);
	while (time() < $deadline)
	{
		# psql may exit before it reads its input (the server is starting
		# up): IPC::Run then dies of the broken pipe
		my ($ret, $out) = eval { $node->psql('postgres', $sql) };
		return 1 if defined $ret && $ret == 0 && $out eq 't';
		usleep(100_000);
	}
	return 0;
}

=pod

=item worker_pid($node, $seconds)

The pid of the database's apply worker (backend_type C<delta_join worker>),
waiting up to C<$seconds> (default 20) for one to run; undef if none.

=cut

sub worker_pid
{
	my ($node, $seconds) = @_;
	my $deadline = time() + ($seconds // 20);
	while (time() < $deadline)
	{
		my ($ret, $out) = eval {
			$node->psql('postgres',
				"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'");
		};
		return $out if defined $ret && $ret == 0 && $out =~ /^\d+$/;
		usleep(100_000);
	}
	return undef;
}

=pod

=back

=cut

1;
