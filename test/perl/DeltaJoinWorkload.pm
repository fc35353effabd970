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
  DeltaJoinTest::target_ok($node, 's.target', $query, 'seed 17');

=head1 DESCRIPTION

The invariant these tests check (DESIGN.md §6.1): after
C<delta_join.wait()>, a view's target holds the result of its query; the
check is C<DeltaJoinTest::target_ok>, for one view, or C<check_views> here
(C<wait()>, then each view).

Writes come from pgbench custom scripts run by several clients at once;
C<--random-seed> makes each client's sequence of random values repeat from
run to run (the interleaving of the clients does not).  pgbench retries a
transaction that hits a deadlock (C<--max-tries>), so scripts need not
order their locks perfectly.

=cut

package DeltaJoinWorkload;

use strict;
use warnings;

use DeltaJoinTest;
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

=item set_based_apply($node, $on)

With C<$on> true, every recompute execution of a set of keys is planned for
its keys (C<delta_join.set_apply_min_keys = 1>: set-based apply, issue 22
item 4, which by default takes sets of 1,000 keys or more, larger than a
test's batches); with C<$on> false, none is (the setting at its maximum),
and every execution runs the generic plan of its batch.  The
differential tests switch it from seed to seed, so that both forms are
compared with the queries.

=cut

sub set_based_apply
{
	my ($node, $on) = @_;
	$node->safe_psql('postgres',
		'ALTER SYSTEM SET delta_join.set_apply_min_keys = '
		  . ($on ? '1' : '2147483647')
		  . '; SELECT pg_reload_conf()');
	note('set-based apply ' . ($on ? 'on' : 'off'));
}

=pod

=item whole_recompute($node, $when)

Sets C<delta_join.whole_recompute_fraction>: with C<$when> 'default', the
default (a batch of groups through joins that dirties half of its target's
rows or more recomputes the whole query, as small test tables often do);
with 'never', the largest value, so that every batch recomputes its dirty
groups one set at a time.  The differential tests of groups through joins
switch it from seed to seed, so that both are compared with the queries.

=cut

sub whole_recompute
{
	my ($node, $when) = @_;
	$node->safe_psql('postgres',
		$when eq 'never'
		? 'ALTER SYSTEM SET delta_join.whole_recompute_fraction = 1000; SELECT pg_reload_conf()'
		: 'ALTER SYSTEM RESET delta_join.whole_recompute_fraction; SELECT pg_reload_conf()');
	note("whole recompute: $when");
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
	  or diag(DeltaJoinTest::status_text($node));
}

=pod

=item statuses_ok($node, \@targets, $name)

C<status_ok> of each target, in order, from one query of
C<delta_join.status>.

=cut

sub statuses_ok
{
	my ($node, $targets, $name) = @_;
	my $values = join(', ', map { "($_, '$targets->[$_]')" } 0 .. $#$targets);
	my @rows = split /\n/, $node->safe_psql(
		'postgres', qq{
		SELECT (SELECT concat_ws('|', state, changes_seen > 0, last_error IS NULL)
		        FROM delta_join.status s WHERE s.target::regclass = v.t::regclass)
		FROM (VALUES $values) v(n, t) ORDER BY n});
	foreach my $i (0 .. $#$targets)
	{
		is($rows[$i] // '', 'active|t|t',
			"$name: $targets->[$i] is active with no error and has seen changes")
		  or diag(DeltaJoinTest::status_text($node));
	}
}

=pod

=item check_views($node, \%views, $name, %options)

C<wait()> returns true, then every target of C<%views> (target => query)
holds its query's result (C<DeltaJoinTest::target_ok>, with C<%options>).

=cut

sub check_views
{
	my ($node, $views, $name, %opts) = @_;
	ok(wait_views($node), "$name: wait() returns true");
	DeltaJoinTest::targets_ok($node, $name,
		[ map { [ $_, $views->{$_}, %opts ] } sort keys %$views ]);
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

=item worker_pid($node, $seconds, $killed)

The pid of the database's apply worker (backend_type C<delta_join worker>),
waiting up to C<$seconds> (default 20) for one to run; undef if none.  With
C<$killed> (a reference to a list of pids), a worker that is none of them:
a worker just killed may still be listed for a moment.

=cut

sub worker_pid
{
	my ($node, $seconds, $killed) = @_;
	my $deadline = time() + ($seconds // 20);
	while (time() < $deadline)
	{
		my ($ret, $out) = eval {
			$node->psql('postgres',
				"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'");
		};
		return $out
		  if defined $ret && $ret == 0 && $out =~ /^\d+$/
		  && !grep { $_ == $out } @{ $killed // [] };
		usleep(100_000);
	}
	return undef;
}

=pod

=item stop_worker_idle($node, $pid)

Stops the apply worker (or a helper) C<$pid> (SIGSTOP) while it waits for
work, never in a batch: stopped while it held a buffer's content lock
(reading a source) or any other LWLock, it would make writers wait for it
for ever.  The
worker is stopped, then looked at: if it is not waiting on its latch
(wait event C<Extension>) outside a statement, it is let go and tried again
a moment later, for at most 60 s.  True when it was stopped idle; continue
it with C<kill 'CONT', $pid>.

The look has a statement timeout: C<pg_stat_activity> waits for a backend
that is in the middle of updating its status, which one stopped there
would never finish.

=cut

sub stop_worker_idle
{
	my ($node, $pid) = @_;
	my $deadline = time() + 60;
	while (time() < $deadline)
	{
		kill 'STOP', $pid or return 0;
		my ($ret, $out) = $node->psql(
			'postgres', qq{
			SET statement_timeout = '2s';
			SELECT state IS DISTINCT FROM 'active' AND wait_event = 'Extension'
			  FROM pg_stat_activity WHERE pid = $pid});
		return 1 if $ret == 0 && $out eq 't';
		kill 'CONT', $pid;
		usleep(20_000);
	}
	return 0;
}

=pod

=back

=cut

1;
