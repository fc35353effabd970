--
-- test/bench/hot_merchant.sql -- the hot group of the aggregate benchmark:
-- merchant 0 with :nhot orders (ids norders+1 .. norders+nhot) over :ipm items.
--
INSERT INTO items
SELECT 0, i, 'item 0/' || i || ' ' || left(md5('0/' || i), 16)
FROM generate_series(1, :ipm) AS i;

INSERT INTO orders
SELECT 0, (k - 1) % :ipm + 1, :norders + k, (k % 100000) / 100.0 + 1
FROM generate_series(1, :nhot) AS k;

VACUUM ANALYZE items, orders;
