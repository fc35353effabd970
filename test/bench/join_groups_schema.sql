-- test/bench/join_groups_schema.sql -- the tables of the benchmarks of
-- aggregates over joins (join_groups.sh, join_groups_memory.sh): :merchants
-- merchants in 100 regions, :orders orders spread over them, each order's
-- amount given by :amount (an expression of g, the order's id), both
-- tables with REPLICA IDENTITY FULL (which keyed recompute of groups
-- through joins, and adding, need).
--   psql -v orders=N -v merchants=N -v amount="..." < join_groups_schema.sql
CREATE EXTENSION delta_join;
CREATE TABLE merchants (id int PRIMARY KEY, region text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, merchant_id int NOT NULL, amount numeric(12,2));
CREATE INDEX ON orders (merchant_id);
ALTER TABLE merchants REPLICA IDENTITY FULL;
ALTER TABLE orders REPLICA IDENTITY FULL;
INSERT INTO merchants SELECT g, 'region ' || (g % 100) FROM generate_series(1, :merchants) g;
INSERT INTO orders SELECT g, 1 + (g::bigint * 7919) % :merchants, :amount
  FROM generate_series(1, :orders) g;
VACUUM ANALYZE merchants;
VACUUM ANALYZE orders;
