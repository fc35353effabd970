=pod

=head1 NAME

DeltaJoinOuter - the schema, views and random writes of the outer-join and
retract-mode differential and crash TAP tests

=head1 SYNOPSIS

  use DeltaJoinOuter;

  DeltaJoinOuter::create_schema($node, 's17', 17);    # tables and rows
  my $q = DeltaJoinOuter::in_schema($DeltaJoinOuter::views{b}[0], 's17');
  my $scripts = DeltaJoinOuter::scripts('s17', 4);    # pgbench -f arguments
  DeltaJoinWorkload::pgbench_ok($node, $scripts, 'writes', clients => 4, ...);
  DeltaJoinTest::target_ok($node, 's17.b_up', $q, 'seed 17',
	  %{ $DeltaJoinOuter::views{b}[1] });

=head1 DESCRIPTION

Seven tables in one schema: merchants, items, orders and store_orders
(orders.item_id is a join column outside the primary key, with an index
on (merchant_id, item_id)), users and domains (DESIGN.md §1's second
example, from C<DeltaJoinTest::worked_example>), and fa and fb (joined on
k, outside their keys, indexed).
C<%views> holds the outer-join queries the tests maintain, by shape:

  a  orders LEFT JOIN items on (merchant_id, item_id)          N:1
  b  users LEFT JOIN domains ON d.user_id = u.id               1:N
  c  fa FULL JOIN fb ON fa.k = fb.k (both sides' keys listed)  M:N
  d  orders JOIN merchants LEFT JOIN items                     inner + outer
  u  'web' orders JOIN items UNION ALL 'store' store_orders LEFT JOIN items

each as C<[ query, spec ]>, the query naming its tables C<SCHEMA.name>
(C<in_schema> puts a schema there) and the spec being the options of
C<DeltaJoinTest::target_ok> for the view in upsert mode: the columns that
carry the key of every source (C<key>), and the preserved and partner
columns of each outer side (C<sides>).
C<$inner_query> is orders JOIN items with a filter on columns outside the
result's key (which retract mode allows).

C<scripts> writes pgbench scripts that insert (upsert), update and delete
rows of EVERY table and move join keys: updates of a join column outside
the primary key (an order's item, a domain's user, fa.k, fb.k) and of a
primary key that is also a join key (an item's item_id, a user's id, a
merchant's id, an order's merchant_id); plus multi-statement transactions
and rolled-back ones.  Inserts and primary-key moves only create keys of
the client's own class (key mod clients = client_id), so no write fails on
a unique violation; deadlocks are retried by pgbench.

=cut

package DeltaJoinOuter;

use strict;
use warnings;

use DeltaJoinTest;
use DeltaJoinWorkload;

=pod

=head1 VARIABLES AND FUNCTIONS

=over

=item %views, $inner_query

The queries, as described above.

=cut

# name => [ query in schema SCHEMA, options of target_ok in upsert mode ]
our %views = (
	a => [
		q{SELECT o.merchant_id, o.order_id, o.item_id, o.amount, o.note,
       i.merchant_id AS i_merchant_id, i.item_id AS i_item_id, i.item_name, i.price
  FROM SCHEMA.orders AS o
  LEFT JOIN SCHEMA.items AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id},
		{
			mode => 'upsert',
			key => [qw(merchant_id order_id i_merchant_id i_item_id)],
			sides => [ [ [qw(merchant_id order_id)], 'i_item_id' ] ]
		}
	],
	b => [
		q{SELECT u.id AS user_id, u.firstname, u.lastname, d.id AS domain_id, d.domain_name
  FROM SCHEMA.users AS u
  LEFT JOIN SCHEMA.domains AS d ON d.user_id = u.id},
		{
			mode => 'upsert',
			key => [qw(user_id domain_id)],
			sides => [ [ ['user_id'], 'domain_id' ] ]
		}
	],
	c => [
		q{SELECT fa.id AS a_id, fb.id AS b_id, fa.k AS a_k, fb.k AS b_k, fa.av, fb.bv
  FROM SCHEMA.fa FULL JOIN SCHEMA.fb ON fa.k = fb.k},
		{
			mode => 'upsert',
			key => [qw(a_id b_id)],
			sides => [ [ ['a_id'], 'b_id' ], [ ['b_id'], 'a_id' ] ]
		}
	],
	d => [
		q{SELECT o.merchant_id, o.order_id, o.item_id, m.mname, o.amount,
       i.merchant_id AS i_merchant_id, i.item_id AS i_item_id, i.item_name
  FROM SCHEMA.orders AS o
  JOIN SCHEMA.merchants AS m ON m.merchant_id = o.merchant_id
  LEFT JOIN SCHEMA.items AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id},
		{
			mode => 'upsert',
			key => [qw(merchant_id order_id i_merchant_id i_item_id)],
			sides => [ [ [qw(merchant_id order_id)], 'i_item_id' ] ]
		}
	],
	u => [
		q{SELECT 'web' AS channel, o.merchant_id, o.order_id, o.item_id, o.amount,
       i.merchant_id AS i_merchant_id, i.item_id AS i_item_id, i.item_name
  FROM SCHEMA.orders AS o
  JOIN SCHEMA.items AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id
UNION ALL
SELECT 'store' AS channel, s.merchant_id, s.order_id, s.item_id, s.amount,
       i.merchant_id, i.item_id, i.item_name
  FROM SCHEMA.store_orders AS s
  LEFT JOIN SCHEMA.items AS i ON s.merchant_id = i.merchant_id AND s.item_id = i.item_id},
		{
			mode => 'upsert',
			key => [qw(channel merchant_id order_id i_merchant_id i_item_id)],
			sides => [ [ [qw(channel merchant_id order_id)], 'i_item_id' ] ]
		}
	]);
our $inner_query = q{SELECT o.merchant_id, o.order_id, o.item_id, o.amount, i.item_name, i.price
  FROM SCHEMA.orders AS o
  JOIN SCHEMA.items AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id
  WHERE o.amount >= 20 AND i.price IS NOT NULL};

=pod

=item in_schema($query, $schema)

The query with its tables in C<$schema>.

=cut

sub in_schema
{
	my ($query, $s) = @_;
	(my $q = $query) =~ s/SCHEMA\./$s./g;
	return $q;
}

=pod

=item create_schema($node, $schema, $seed)

Creates the schema and its tables in database postgres and fills them
with rows drawn from C<setseed(1 / $seed)>.  Key ranges: merchants 0..7,
items (0..7, 0..39), orders and store_orders (0..7, 0..199), users 0..59,
domains 0..199 (user_id 0..89), fa and fb 0..79 with k 0..29.

=cut

sub create_schema
{
	my ($node, $s, $seed) = @_;
	DeltaJoinTest::worked_example($node, schema => $s, orders_items => 0, users_domains => 1);
	$node->safe_psql(
		'postgres', qq{
		SELECT setseed(1.0 / $seed);
		CREATE TABLE $s.merchants (merchant_id bigint PRIMARY KEY, mname text);
		CREATE TABLE $s.items (
		  merchant_id bigint, item_id bigint, item_name text, price numeric(12,3),
		  PRIMARY KEY (merchant_id, item_id));
		CREATE TABLE $s.orders (
		  merchant_id bigint, order_id bigint, item_id bigint, amount numeric(18,2),
		  note text,
		  PRIMARY KEY (merchant_id, order_id));
		CREATE INDEX ON $s.orders (merchant_id, item_id);
		CREATE TABLE $s.store_orders (LIKE $s.orders INCLUDING INDEXES);
		CREATE TABLE $s.fa (id bigint PRIMARY KEY, k bigint, av text);
		CREATE INDEX ON $s.fa (k);
		CREATE TABLE $s.fb (id bigint PRIMARY KEY, k bigint, bv text);
		CREATE INDEX ON $s.fb (k);

		INSERT INTO $s.merchants SELECT m, 'merchant ' || m FROM generate_series(0, 5) m;
		INSERT INTO $s.items
		  SELECT m, i, CASE WHEN random() < 0.2 THEN NULL ELSE 'item ' || i END,
		         CASE WHEN random() < 0.1 THEN NULL ELSE round((random() * 100)::numeric, 3) END
		  FROM generate_series(0, 7) m, generate_series(0, 39) i
		  WHERE random() < 0.6;
		INSERT INTO $s.orders
		  SELECT m, o, (random() * 39)::int, round((random() * 100)::numeric, 2),
		         CASE WHEN random() < 0.3 THEN NULL ELSE 'first ' || o END
		  FROM generate_series(0, 7) m, generate_series(0, 199) o
		  WHERE random() < 0.4;
		INSERT INTO $s.store_orders
		  SELECT m, o, (random() * 39)::int, round((random() * 100)::numeric, 2), NULL
		  FROM generate_series(0, 7) m, generate_series(0, 199) o
		  WHERE random() < 0.2;
		INSERT INTO $s.users
		  SELECT u, 'first ' || u, CASE WHEN random() < 0.2 THEN NULL ELSE 'last ' || u END
		  FROM generate_series(0, 49) u;
		INSERT INTO $s.domains
		  SELECT d, (random() * 89)::int, 'd' || d || '.example'
		  FROM generate_series(0, 149) d;
		INSERT INTO $s.fa SELECT x, (random() * 29)::int, 'a' || x
		  FROM generate_series(0, 79) x WHERE random() < 0.7;
		INSERT INTO $s.fb SELECT x, (random() * 29)::int, 'b' || x
		  FROM generate_series(0, 79) x WHERE random() < 0.7;});
}

=pod

=item scripts($schema, $clients)

Writes the pgbench scripts for C<$clients> clients (the key classes
depend on it); returns what C<DeltaJoinWorkload::pgbench> takes.  One
script per table draws one operation per transaction.

=cut

sub scripts
{
	my ($s, $clients) = @_;
	my $pick = qq{\\set m random(0, 7)
\\set m2 random(0, 7)
\\set i random(0, 39)
\\set o random(0, 199)
\\set u random(0, 59)
\\set du random(0, 89)
\\set d random(0, 199)
\\set x random(0, 79)
\\set k random(0, 29)
\\set a random(0, 1000000)
\\set n random(0, 9)
\\set op random(0, 9)
\\set own_m :client_id + $clients * random(0, (7 - :client_id) / $clients)
\\set own_i :client_id + $clients * random(0, (39 - :client_id) / $clients)
\\set own_o :client_id + $clients * random(0, (199 - :client_id) / $clients)
\\set own_u :client_id + $clients * random(0, (59 - :client_id) / $clients)
\\set own_d :client_id + $clients * random(0, (199 - :client_id) / $clients)
\\set own_x :client_id + $clients * random(0, (79 - :client_id) / $clients)
};
	my %sql = (
		merchants => qq{\\if :op < 4
INSERT INTO $s.merchants VALUES (:own_m, 'merchant ' || :own_m || ' v' || :a)
  ON CONFLICT (merchant_id) DO UPDATE SET mname = excluded.mname;
\\elif :op < 7
UPDATE $s.merchants SET mname = CASE WHEN :n < 2 THEN NULL ELSE 'renamed ' || :a END
  WHERE merchant_id = :m;
\\elif :op < 8
DELETE FROM $s.merchants WHERE merchant_id = :m;
\\else
UPDATE $s.merchants SET merchant_id = :own_m
  WHERE merchant_id = :m
    AND NOT EXISTS (SELECT FROM $s.merchants WHERE merchant_id = :own_m);
\\endif
},
		items => qq{\\if :op < 4
INSERT INTO $s.items VALUES (:m, :own_i,
    CASE WHEN :n < 2 THEN NULL ELSE 'item ' || :own_i || ' v' || :a END,
    CASE WHEN :n = 9 THEN NULL ELSE :a / 10000.0 END)
  ON CONFLICT (merchant_id, item_id)
  DO UPDATE SET item_name = excluded.item_name, price = excluded.price;
\\elif :op < 6
UPDATE $s.items SET item_name = CASE WHEN :n < 2 THEN NULL ELSE 'renamed ' || :a END,
    price = CASE WHEN :n = 9 THEN NULL ELSE :a / 10000.0 END
  WHERE merchant_id = :m AND item_id = :i;
\\elif :op < 8
DELETE FROM $s.items WHERE merchant_id = :m AND item_id = :i;
\\else
UPDATE $s.items SET item_id = :own_i
  WHERE merchant_id = :m AND item_id = :i
    AND NOT EXISTS (SELECT FROM $s.items WHERE merchant_id = :m AND item_id = :own_i);
\\endif
},
		orders => qq{\\if :op < 3
INSERT INTO $s.orders VALUES (:m, :own_o, :i, :a / 10000.0,
    CASE WHEN :n < 3 THEN NULL ELSE 'note ' || :a END)
  ON CONFLICT (merchant_id, order_id)
  DO UPDATE SET amount = excluded.amount, note = excluded.note;
\\elif :op < 4
UPDATE $s.orders SET amount = amount + :n - 4.5 WHERE merchant_id = :m AND order_id = :o;
\\elif :op < 5
UPDATE $s.orders SET amount = :a / 10000.0, note = 'bulk ' || :a
  WHERE merchant_id = :m AND item_id = :i;
\\elif :op < 6
DELETE FROM $s.orders WHERE merchant_id = :m AND order_id = :o;
\\elif :op < 8
UPDATE $s.orders SET item_id = :i WHERE merchant_id = :m AND order_id = :o;
\\elif :op < 9
UPDATE $s.orders SET item_id = :i WHERE merchant_id = :m AND item_id = (:i + 1) % 40;
\\else
UPDATE $s.orders SET merchant_id = :m2
  WHERE merchant_id = :m AND order_id = :own_o
    AND NOT EXISTS (SELECT FROM $s.orders WHERE merchant_id = :m2 AND order_id = :own_o);
\\endif
},
		store_orders => qq{\\if :op < 4
INSERT INTO $s.store_orders VALUES (:m, :own_o, :i, :a / 10000.0, NULL)
  ON CONFLICT (merchant_id, order_id) DO UPDATE SET amount = excluded.amount;
\\elif :op < 6
DELETE FROM $s.store_orders WHERE merchant_id = :m AND order_id = :o;
\\else
UPDATE $s.store_orders SET item_id = :i WHERE merchant_id = :m AND order_id = :o;
\\endif
},
		users => qq{\\if :op < 4
INSERT INTO $s.users VALUES (:own_u, 'first ' || :a, 'last ' || :a)
  ON CONFLICT (id) DO UPDATE SET firstname = excluded.firstname;
\\elif :op < 6
UPDATE $s.users SET lastname = CASE WHEN :n < 3 THEN NULL ELSE 'renamed ' || :a END
  WHERE id = :u;
\\elif :op < 8
DELETE FROM $s.users WHERE id = :u;
\\else
UPDATE $s.users SET id = :own_u
  WHERE id = :u AND NOT EXISTS (SELECT FROM $s.users WHERE id = :own_u);
\\endif
},
		domains => qq{\\if :op < 4
INSERT INTO $s.domains VALUES (:own_d, :du, 'd' || :own_d || '.v' || :a)
  ON CONFLICT (id) DO UPDATE SET domain_name = excluded.domain_name;
\\elif :op < 5
UPDATE $s.domains SET domain_name = 'renamed' || :a || '.example' WHERE id = :d;
\\elif :op < 7
DELETE FROM $s.domains WHERE id = :d;
\\else
UPDATE $s.domains SET user_id = :du WHERE id = :d;
\\endif
},
		fa => qq{\\if :op < 4
INSERT INTO $s.fa VALUES (:own_x, :k, 'a' || :a)
  ON CONFLICT (id) DO UPDATE SET av = excluded.av;
\\elif :op < 5
UPDATE $s.fa SET av = CASE WHEN :n < 2 THEN NULL ELSE 'a' || :a END WHERE id = :x;
\\elif :op < 7
DELETE FROM $s.fa WHERE id = :x;
\\else
UPDATE $s.fa SET k = CASE WHEN :n = 0 THEN NULL ELSE :k END WHERE id = :x;
\\endif
},
		fb => qq{\\if :op < 4
INSERT INTO $s.fb VALUES (:own_x, :k, 'b' || :a)
  ON CONFLICT (id) DO UPDATE SET bv = excluded.bv;
\\elif :op < 5
UPDATE $s.fb SET bv = 'b' || :a WHERE id = :x;
\\elif :op < 7
DELETE FROM $s.fb WHERE id = :x;
\\else
UPDATE $s.fb SET k = :k WHERE id = :x;
\\endif
});
	my %scripts = map { ($_ => [ 3, $pick . $sql{$_} ]) } keys %sql;
	$scripts{orders}[0] = 5;
	$scripts{items}[0] = 4;
	$scripts{merchants}[0] = 1;
	# several tables in one transaction; deadlocks are retried by pgbench
	$scripts{transaction} = [
		3, $pick . qq{BEGIN;
UPDATE $s.domains SET user_id = :u WHERE id = :d;
UPDATE $s.users SET firstname = 'tx ' || :a WHERE id = :u;
UPDATE $s.items SET item_id = :own_i
  WHERE merchant_id = :m AND item_id = :i
    AND NOT EXISTS (SELECT FROM $s.items WHERE merchant_id = :m AND item_id = :own_i);
UPDATE $s.orders SET item_id = :own_i WHERE merchant_id = :m AND item_id = :i;
INSERT INTO $s.fb VALUES (:own_x, :k, 'tx' || :a) ON CONFLICT (id) DO UPDATE SET k = excluded.k;
UPDATE $s.fa SET k = :k WHERE id = :x;
COMMIT;
}
	];
	# every partner of a row at once
	$scripts{partners_gone} = [
		1, $pick . qq{\\if :op < 5
DELETE FROM $s.fa WHERE k = :k;
\\else
DELETE FROM $s.domains WHERE user_id = :u;
\\endif
}
	];
	$scripts{rolled_back} = [
		1, $pick . qq{BEGIN;
DELETE FROM $s.users WHERE id = :u;
UPDATE $s.domains SET user_id = :u WHERE id = :d;
DELETE FROM $s.items WHERE merchant_id = :m;
UPDATE $s.fa SET k = :k WHERE id = :x;
ROLLBACK;
}
	];
	return DeltaJoinWorkload::write_scripts(%scripts);
}

=pod

=back

=cut

1;
