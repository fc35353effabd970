# ALTER DATABASE ... SET TABLESPACE of a database whose apply worker has
# not yet applied what was committed.
#
# Logical decoding maps a change to its table by the tablespace its WAL
# record names, and finds a table of the database's default tablespace by
# the database's tablespace as it is when decoding runs: a change written
# before the move and decoded after it cannot be mapped.  The worker
# failed on every start ("could not map filenode ... to relation OID"), the
# views stayed stalled, refresh() could not help, and the slot kept all WAL
# from then on.  The command now first waits for the slot to confirm every
# transaction committed so far (the database's lock keeps sessions out).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('set_tablespace');
my $ts = $node->basedir . '/ts';
mkdir $ts or die "mkdir $ts: $!";
$node->safe_psql('postgres', "CREATE TABLESPACE elsewhere LOCATION '$ts'");
$node->safe_psql('postgres', 'CREATE DATABASE dj');
$node->safe_psql('dj', 'CREATE EXTENSION delta_join');

$node->safe_psql(
	'dj', q{
	CREATE TABLE acct (id bigint PRIMARY KEY, grp int NOT NULL, v int);
	ALTER TABLE acct REPLICA IDENTITY FULL;
	CREATE INDEX ON acct (grp);
	SELECT delta_join.create_view('acct_sum',
		'SELECT grp, count(*) AS n, sum(v) AS s FROM acct GROUP BY grp');
});

for my $round (1 .. 2)
{
	my $tablespace = $round == 1 ? 'elsewhere' : 'pg_default';
	my $from = $round * 100000;

	# a batch the worker takes a while to apply, and the move right after
	$node->safe_psql('dj',
		"INSERT INTO acct SELECT g, g % 10, g FROM generate_series($from, $from + 49999) g");
	$node->safe_psql('postgres', "ALTER DATABASE dj SET TABLESPACE $tablespace");

	is($node->safe_psql('dj', "SELECT delta_join.wait('acct_sum', '60s')"),
		't', "wait() after the move to $tablespace");
	is( $node->safe_psql('dj',
			"SELECT state FROM delta_join.status WHERE target = 'public.acct_sum'"),
		'active', "the view is active after the move to $tablespace");
	DeltaJoinTest::target_ok($node, 'acct_sum',
		'SELECT grp, count(*) AS n, sum(v) AS s FROM acct GROUP BY grp',
		"the target after the move to $tablespace", dbname => 'dj');
	$node->safe_psql('dj', "INSERT INTO acct VALUES ($from + 60000, 1, 1)");
	is($node->safe_psql('dj', "SELECT delta_join.wait('acct_sum', '60s')"),
		't', "and it follows changes after the move to $tablespace");
}

$node->stop;
done_testing();
