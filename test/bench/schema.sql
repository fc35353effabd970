--
-- test/bench/schema.sql -- the sources of DESIGN.md §1 and their data.
--
-- psql variables (set by run.sh): norders, nmerchants, ipm (items per
-- merchant).  Order g (1..norders) belongs to merchant (g-1) % nmerchants + 1
-- and item ((g-1) / nmerchants) % ipm + 1, so the pgbench scripts can pick a
-- random existing key from one random number.
--
CREATE EXTENSION delta_join;

CREATE TABLE orders (
	merchant_id	bigint,
	item_id		bigint,
	order_id	bigint,
	amount		numeric(18,2),
	PRIMARY KEY (merchant_id, item_id, order_id));

CREATE TABLE items (
	merchant_id	bigint,
	item_id		bigint,
	item_name	text,
	PRIMARY KEY (merchant_id, item_id));

INSERT INTO items
SELECT m, i, 'item ' || m || '/' || i || ' ' || left(md5(m || '/' || i), 16)
FROM generate_series(1, :nmerchants) AS m, generate_series(1, :ipm) AS i;

INSERT INTO orders
SELECT (g - 1) % :nmerchants + 1,
	   ((g - 1) / :nmerchants) % :ipm + 1,
	   g,
	   (g % 100000) / 100.0 + 1
FROM generate_series(1, :norders) AS g;

-- Samples of delta_join.status taken every few ms by bench_sample (unlogged:
-- the sampler's own writes put nothing in the WAL for the worker to decode).
CREATE UNLOGGED TABLE bench_samples (
	tag			text,
	t			timestamptz,
	changes		bigint,
	keys		bigint,
	lag_ms		float8,
	lag_bytes	bigint);
CREATE UNLOGGED TABLE bench_stop (tag text);

-- Sample the status row of one view every p_every_s seconds until run.sh
-- inserts p_tag into bench_stop, or p_max_s seconds have passed.  Each
-- sample is its own transaction, started right before it is taken, so the
-- view's lag (now() - commit time of the newest applied change) is current.
CREATE PROCEDURE bench_sample(p_tag text, p_target text,
							  p_max_s float8, p_every_s float8)
LANGUAGE plpgsql AS $$
DECLARE
	t_end timestamptz := clock_timestamp() + p_max_s * interval '1 second';
BEGIN
	LOOP
		COMMIT;
		INSERT INTO bench_samples
		SELECT p_tag, clock_timestamp(), s.changes_seen, s.keys_applied,
			   extract(epoch FROM s.lag) * 1000, s.lag_bytes
		FROM delta_join.status s
		WHERE s.target::regclass = p_target::regclass;
		COMMIT;
		EXIT WHEN clock_timestamp() > t_end
			OR EXISTS (SELECT 1 FROM bench_stop WHERE tag = p_tag);
		PERFORM pg_sleep(p_every_s);
	END LOOP;
END $$;

VACUUM ANALYZE items, orders;
