-- The workload behind examples/demo-capture.jsonl (tools/make_demo_capture.py runs it
-- on a throwaway PostgreSQL 15 and peeks a pgoutput slot with proto_version 1 and
-- messages 'true'; the publication covers all tables).
-- @setup
CREATE TYPE order_status AS ENUM ('new', 'paid', 'shipped');
CREATE TABLE customers (
    id serial PRIMARY KEY,
    name text NOT NULL,
    email varchar(120) UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE orders (
    id bigserial PRIMARY KEY,
    customer_id int NOT NULL REFERENCES customers(id),
    status order_status NOT NULL DEFAULT 'new',
    total numeric(10, 2) NOT NULL,
    items jsonb,
    tags text[]
);
-- @changes
INSERT INTO customers (name, email, created_at) VALUES
    ('Ada Lovelace', 'ada@example.org', '2026-11-01 09:30:00+00'),
    ('Grace Hopper', 'grace@example.org', '2026-11-02 14:05:00+00');
BEGIN;
INSERT INTO orders (customer_id, total, items, tags)
    VALUES (1, 129.90, '{"sku": "B-42", "qty": 2}', '{gift,"express, please"}');
INSERT INTO orders (customer_id, total, items, tags) VALUES (2, 15.00, '[]', '{}');
SELECT pg_logical_emit_message(true, 'audit', 'two orders placed');
COMMIT;
UPDATE orders SET status = 'paid' WHERE id = 1;
UPDATE customers SET email = NULL WHERE id = 2;
DELETE FROM orders WHERE id = 2;
