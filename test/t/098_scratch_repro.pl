use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;
use DeltaJoinOuterOld;
my $node = DeltaJoinTest::new_node('main');
my $clients = 4;
my $q0 = q{SELECT fa.id AS a_id, fb.id AS b_id, fa.k AS a_k, fb.k AS b_k, fa.av, fb.bv FROM SCHEMA.fa FULL JOIN SCHEMA.fb ON fa.k = fb.k};
for my $round (1 .. 12)
{
	my $seed = 90001 + 1000 * $round;
	my $s = "r$round";
	DeltaJoinOuterOld::create_schema($node, $s, $seed);
	$node->safe_psql('postgres', qq{
	CREATE TABLE $s.audit (seq bigserial, xid xid8 DEFAULT pg_current_xact_id(), lsn pg_lsn DEFAULT pg_current_wal_insert_lsn(), tbl text, op text, old_id bigint, old_k bigint, new_id bigint, new_k bigint);
	CREATE FUNCTION $s.aud() RETURNS trigger LANGUAGE plpgsql AS \$f\$ BEGIN
	  INSERT INTO $s.audit (tbl, op, old_id, old_k, new_id, new_k) VALUES (TG_TABLE_NAME, TG_OP,
	    CASE WHEN TG_OP <> 'INSERT' THEN OLD.id END, CASE WHEN TG_OP <> 'INSERT' THEN OLD.k END,
	    CASE WHEN TG_OP <> 'DELETE' THEN NEW.id END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.k END);
	  RETURN NULL; END \$f\$;
	CREATE TRIGGER aud AFTER INSERT OR UPDATE OR DELETE ON $s.fa FOR EACH ROW EXECUTE FUNCTION $s.aud();
	CREATE TRIGGER aud AFTER INSERT OR UPDATE OR DELETE ON $s.fb FOR EACH ROW EXECUTE FUNCTION $s.aud();
	});
	my %views;
	my $q = DeltaJoinOuterOld::in_schema($q0, $s);
	$node->safe_psql('postgres', "SELECT delta_join.create_view('$s.c_rt', \$q\$ $q \$q\$, options => '{\"retract\": true}')");
	foreach my $name (sort keys %DeltaJoinOuterOld::views)
	{
		my $q = DeltaJoinOuterOld::in_schema($DeltaJoinOuterOld::views{$name}[0], $s);
		next if $name eq 'c';
		$node->safe_psql('postgres', "SELECT delta_join.create_view('$s.${name}_rt', \$q\$ $q \$q\$, options => '{\"retract\": true}')");
		$node->safe_psql('postgres', "SELECT delta_join.create_view('$s.${name}_up', \$q\$ $q \$q\$)");
	}
	DeltaJoinWorkload::pgbench_ok($node, DeltaJoinOuterOld::scripts($s, $clients), "round $round",
		seed => $seed, clients => $clients, rate => 1500, transactions => 2000);
	ok(DeltaJoinWorkload::wait_views($node, undef, '180s'), 'wait');
	my ($m, $e) = DeltaJoinWorkload::diff_counts($node, "$s.c_rt", $q);
	if ($m + $e > 0)
	{
		DeltaJoinWorkload::is_view_equal($node, "$s.c_rt", $q, "round $round");
		diag($node->safe_psql('postgres', qq{
		  CREATE TABLE missing AS SELECT * FROM (($q) EXCEPT ALL TABLE $s.c_rt) x;
		  SELECT 'missing', * FROM missing;
		  SELECT 'extra', * FROM (TABLE $s.c_rt EXCEPT ALL ($q)) x;
		  SELECT 'target k', * FROM $s.c_rt WHERE a_k IN (SELECT b_k FROM missing) OR b_k IN (SELECT b_k FROM missing) ORDER BY 3,4;
		  SELECT 'audit', seq, xid, lsn, tbl, op, old_id, old_k, new_id, new_k FROM $s.audit
		  WHERE old_k IN (SELECT b_k FROM missing) OR new_k IN (SELECT b_k FROM missing)
		     OR (tbl = 'fb' AND (old_id IN (SELECT b_id FROM missing) OR new_id IN (SELECT b_id FROM missing)))
		  ORDER BY seq;}));
		last;
	}
	ok(1, "round $round ok");
	$node->safe_psql('postgres', "SELECT delta_join.drop_view(target::text) FROM delta_join.views");
}
$node->stop;
done_testing();
