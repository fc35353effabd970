#!/usr/bin/perl
#
# test/check_layers.pl -- the import graph of src/ goes one way.
#
# src/ has a folder per layer (README, "Architecture"), listed here from the
# bottom up.  A file may include the headers of its own layer and of the
# layers below it, never of one above.  Within the whole tree, modules (a
# .c file and the .h of the same name are one module) may not call each
# other in a cycle, except the recursions named in %allowed_cycles: a .c
# file that includes another module's header is taken to call it.  (A
# header including another only borrows its types, which the layer rule
# already orders.)
#
# Prints each violation and ends with "ok" or "FAILED"; exits non-zero on
# failure.  Run by "make test" (test/run_tests.sh), which counts it as one
# test.

use strict;
use warnings;

use File::Basename qw(basename dirname);
use FindBin;

my @layers = qw(base registry analysis capture apply process ops citus face);

# Cycles that are recursion by design, as "module module ...", sorted.  None
# today.  The analyzer's one recursion -- analysis_query (analyze.c) hands a
# UNION ALL to analysis_union (analyze_union.c), which analyses each branch
# with analysis_query -- goes through analysis.h, the header that the
# analyzer's files share and that no .c file of its name owns: to this
# check it is a module of its own, called by both, so no cycle.
my %allowed_cycles = ();

my $src = "$FindBin::Bin/../src";
my %rank;
@rank{@layers} = (0 .. $#layers);

my @files = sort glob("$src/*/*.c $src/*/*.h");
my @loose = grep { -f $_ } glob("$src/*.c $src/*.h");
my $failed = 0;

foreach my $f (@loose)
{
	print "src/" . basename($f) . ": outside every layer's folder\n";
	$failed++;
}

# module -> { module it includes => 1 }
my %deps;
foreach my $file (@files)
{
	my $layer = basename(dirname($file));
	my $module = "$layer/" . basename($file) =~ s/\.[ch]$//r;
	unless (exists $rank{$layer})
	{
		print "src/$layer/: not a layer (add it to test/check_layers.pl)\n";
		$failed++;
		next;
	}
	$deps{$module} //= {};
	open(my $fh, '<', $file) or die "$file: $!";
	while (my $line = <$fh>)
	{
		next unless $line =~ /^\s*#\s*include\s+"([^"\/]+)\/([^"\/]+)\.h"/;
		my ($to_layer, $to_name) = ($1, $2);
		next unless exists $rank{$to_layer};
		if ($rank{$to_layer} > $rank{$layer})
		{
			print "src/$layer/" . basename($file)
			  . ": includes $to_layer/$to_name.h, a layer above $layer\n";
			$failed++;
		}
		my $to = "$to_layer/$to_name";
		$deps{$module}{$to} = 1 unless $to eq $module || $file !~ /\.c$/;
	}
	close($fh);
}

# Cycles: strongly connected components of more than one module (Tarjan)
my ($index, @stack, %on_stack, %idx, %low) = (0);
my @components;

sub visit
{
	my ($v) = @_;
	$idx{$v} = $low{$v} = $index++;
	push @stack, $v;
	$on_stack{$v} = 1;
	foreach my $w (sort keys %{ $deps{$v} // {} })
	{
		if (!exists $idx{$w})
		{
			visit($w);
			$low{$v} = $low{$w} if $low{$w} < $low{$v};
		}
		elsif ($on_stack{$w})
		{
			$low{$v} = $idx{$w} if $idx{$w} < $low{$v};
		}
	}
	if ($low{$v} == $idx{$v})
	{
		my @c;
		my $w;
		do
		{
			$w = pop @stack;
			delete $on_stack{$w};
			push @c, $w;
		} while ($w ne $v);
		push @components, [ sort @c ] if @c > 1;
	}
}

visit($_) foreach grep { !exists $idx{$_} } sort keys %deps;

foreach my $c (@components)
{
	my $name = join(' ', @$c);
	next if $allowed_cycles{$name};
	print "import cycle: $name\n";
	$failed++;
}

printf "%d modules in %d layers: %s\n", scalar(keys %deps), scalar(@layers),
  $failed ? "FAILED ($failed)" : 'ok';
exit($failed ? 1 : 0);
