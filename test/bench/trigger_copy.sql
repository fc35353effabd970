--
-- test/bench/trigger_copy.sql -- the same wide table as order_item_wide,
-- maintained synchronously by row-level AFTER triggers that upsert, the way
-- immediate-maintenance (IVM) extensions work.  Same semantics as the delta
-- join's default: upserts only (a deleted source row leaves its row).
--
CREATE TABLE order_item_wide_trg (
	merchant_id	bigint,
	order_id	bigint,
	item_id		bigint,
	item_name	text,
	amount		numeric(18,2),
	PRIMARY KEY (merchant_id, item_id, order_id));

INSERT INTO order_item_wide_trg
SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
FROM orders AS o
JOIN items  AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id;

CREATE FUNCTION order_item_wide_trg_orders() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO order_item_wide_trg AS w
	SELECT NEW.merchant_id, NEW.order_id, NEW.item_id, i.item_name, NEW.amount
	FROM items AS i
	WHERE i.merchant_id = NEW.merchant_id AND i.item_id = NEW.item_id
	ON CONFLICT (merchant_id, item_id, order_id)
	DO UPDATE SET item_name = EXCLUDED.item_name, amount = EXCLUDED.amount;
	RETURN NULL;
END $$;

CREATE FUNCTION order_item_wide_trg_items() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO order_item_wide_trg AS w
	SELECT o.merchant_id, o.order_id, o.item_id, NEW.item_name, o.amount
	FROM orders AS o
	WHERE o.merchant_id = NEW.merchant_id AND o.item_id = NEW.item_id
	ON CONFLICT (merchant_id, item_id, order_id)
	DO UPDATE SET item_name = EXCLUDED.item_name, amount = EXCLUDED.amount;
	RETURN NULL;
END $$;

CREATE TRIGGER order_item_wide_trg AFTER INSERT OR UPDATE ON orders
FOR EACH ROW EXECUTE FUNCTION order_item_wide_trg_orders();
CREATE TRIGGER order_item_wide_trg AFTER INSERT OR UPDATE ON items
FOR EACH ROW EXECUTE FUNCTION order_item_wide_trg_items();

VACUUM ANALYZE order_item_wide_trg;
