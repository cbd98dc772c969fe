-- Events corpus: every operation and table shape the envelope builder must reproduce.
-- Recorded by tools/record_debezium/record.py: everything before "@changes" is setup,
-- everything after runs LIVE while Debezium streams (psql autocommit, one statement per
-- transaction unless inside BEGIN/COMMIT).
--
-- @modes: wide-*

SET client_min_messages = warning;

CREATE SCHEMA inventory;
CREATE SCHEMA "Sales Ö";
CREATE SCHEMA audit;

-- A plain table with a primary key (REPLICA IDENTITY DEFAULT).
CREATE TABLE inventory.customers (
    id         int PRIMARY KEY,
    first_name varchar(40) NOT NULL,
    last_name  varchar(40) NOT NULL,
    email      text UNIQUE,
    ssn        char(11),
    notes      text,
    balance    numeric(12,2) DEFAULT 0,
    created    timestamptz NOT NULL DEFAULT '2020-01-01 00:00:00+00'
);

-- Composite primary key, REPLICA IDENTITY FULL.
CREATE TABLE inventory.order_lines (
    order_id  bigint,
    line_no   int,
    sku       text NOT NULL,
    qty       int NOT NULL,
    price     numeric(10,2),
    PRIMARY KEY (order_id, line_no)
);
ALTER TABLE inventory.order_lines REPLICA IDENTITY FULL;

-- No primary key, REPLICA IDENTITY FULL (updates/deletes carry the whole old row).
CREATE TABLE inventory.events_log (
    happened  timestamptz NOT NULL,
    kind      text,
    payload   jsonb
);
ALTER TABLE inventory.events_log REPLICA IDENTITY FULL;

-- No primary key, REPLICA IDENTITY DEFAULT: inserts only (PostgreSQL refuses updates and
-- deletes of such a table while a publication publishes them).
CREATE TABLE inventory.raw_inserts (
    val  text,
    n    int
);

-- REPLICA IDENTITY USING INDEX on a unique NOT NULL column that is not the primary key.
CREATE TABLE inventory.products (
    id    int PRIMARY KEY,
    code  text NOT NULL,
    name  text,
    price numeric(10,2)
);
CREATE UNIQUE INDEX products_code_idx ON inventory.products (code);
ALTER TABLE inventory.products REPLICA IDENTITY USING INDEX products_code_idx;

-- REPLICA IDENTITY NOTHING: inserts only (updates/deletes are refused while published).
CREATE TABLE inventory.nothing_tbl (
    id   int PRIMARY KEY,
    v    text
);
ALTER TABLE inventory.nothing_tbl REPLICA IDENTITY NOTHING;

-- TOASTed column (stored out of line), DEFAULT and FULL identity.
CREATE TABLE inventory.documents (
    id      int PRIMARY KEY,
    title   text,
    body    text,
    tags    text[],
    meta    jsonb,
    blob    bytea
);
ALTER TABLE inventory.documents ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE inventory.documents ALTER COLUMN tags SET STORAGE EXTERNAL;
ALTER TABLE inventory.documents ALTER COLUMN meta SET STORAGE EXTERNAL;
ALTER TABLE inventory.documents ALTER COLUMN blob SET STORAGE EXTERNAL;
CREATE TABLE inventory.documents_full (LIKE inventory.documents INCLUDING ALL);
ALTER TABLE inventory.documents_full ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE inventory.documents_full REPLICA IDENTITY FULL;

-- Non-ASCII, mixed-case and otherwise awkward names.
CREATE TABLE "Sales Ö"."Order-Items" (
    "Id"          int PRIMARY KEY,
    "Ünit Price"  numeric(8,2),
    "1st-column"  text,
    "MixedCase"   text,
    "naïve name"  text
);

-- Parent/child for TRUNCATE ... CASCADE, and a sequence for RESTART IDENTITY.
CREATE TABLE audit.parent (id serial PRIMARY KEY, label text);
CREATE TABLE audit.child (id int PRIMARY KEY, parent_id int REFERENCES audit.parent(id));

-- A table that the filter modes exclude, and one whose columns they mask.
CREATE TABLE audit.secrets (id int PRIMARY KEY, token text, pin text);

-- A table altered mid-stream.
CREATE TABLE inventory.evolving (id int PRIMARY KEY, a int, b text);

-- @changes

-- Plain inserts, one per transaction and several in one.
INSERT INTO inventory.customers (id, first_name, last_name, email, ssn, notes, balance)
    VALUES (1, 'Ada', 'Lovelace', 'ada@example.org', '123-45-6789', 'first customer', 10.50);
INSERT INTO inventory.customers (id, first_name, last_name, email, ssn)
    VALUES (2, 'Grace', 'Hopper', 'grace@example.org', '987-65-4321');
BEGIN;
INSERT INTO inventory.customers (id, first_name, last_name, email) VALUES (3, 'Alan', 'Turing', NULL);
INSERT INTO inventory.order_lines VALUES (100, 1, 'SKU-1', 2, 9.99), (100, 2, 'SKU-2', 1, 100.00);
INSERT INTO inventory.events_log VALUES ('2024-01-01 10:00:00+00', 'login', '{"user": 1}');
INSERT INTO inventory.raw_inserts VALUES ('x', 1), (NULL, NULL);
INSERT INTO inventory.products VALUES (1, 'P-001', 'Widget', 5.00), (2, 'P-002', 'Gadget', 7.50);
INSERT INTO inventory.nothing_tbl VALUES (1, 'only inserts');
COMMIT;

-- Updates: non-key columns; key column (primary-key change); REPLICA IDENTITY FULL and INDEX.
UPDATE inventory.customers SET notes = 'updated', balance = balance + 1 WHERE id = 1;
UPDATE inventory.customers SET id = 10 WHERE id = 2;
UPDATE inventory.order_lines SET qty = 3 WHERE order_id = 100 AND line_no = 1;
UPDATE inventory.order_lines SET line_no = 5 WHERE order_id = 100 AND line_no = 2;
UPDATE inventory.events_log SET kind = 'logout';
UPDATE inventory.products SET name = 'Widget Pro' WHERE id = 1;
UPDATE inventory.products SET code = 'P-002b' WHERE id = 2;
UPDATE inventory.products SET id = 20 WHERE id = 2;

-- Deletes under each identity.
DELETE FROM inventory.customers WHERE id = 3;
DELETE FROM inventory.order_lines WHERE order_id = 100 AND line_no = 1;
DELETE FROM inventory.events_log WHERE kind = 'logout';
DELETE FROM inventory.products WHERE id = 1;

-- Multi-table transaction with all three operations, and a transactional message.
BEGIN;
INSERT INTO inventory.customers (id, first_name, last_name, email) VALUES (4, 'Barbara', 'Liskov', 'bl@example.org');
INSERT INTO inventory.order_lines VALUES (200, 1, 'SKU-9', 1, 1.00);
UPDATE inventory.customers SET email = 'ada@newmail.org' WHERE id = 1;
DELETE FROM inventory.order_lines WHERE order_id = 200;
SELECT pg_logical_emit_message(true, 'audit', 'multi-table transaction');
SELECT pg_logical_emit_message(true, 'other', '\x00ff'::bytea);
COMMIT;

-- Logical decoding messages outside transactions (non-transactional).
SELECT pg_logical_emit_message(false, 'audit', 'heartbeat-ish');
SELECT pg_logical_emit_message(false, 'ignored.prefix', '');

-- Unchanged TOAST: big poorly-compressible values stored out of line, then updates that
-- leave them unchanged (pgoutput sends 'u'), on DEFAULT and FULL identity.
INSERT INTO inventory.documents
    SELECT 1, 'doc', string_agg(md5(g::text), ''), ARRAY[string_agg(md5((g + 1)::text), '')],
           jsonb_build_object('k', string_agg(md5((g + 2)::text), '')),
           convert_to(string_agg(md5((g + 3)::text), ''), 'UTF8')
    FROM generate_series(1, 400) g;
UPDATE inventory.documents SET title = 'doc v2' WHERE id = 1;
INSERT INTO inventory.documents_full (id, title, body)
    SELECT 1, 'doc', string_agg(md5(g::text), '') FROM generate_series(1, 400) g;
UPDATE inventory.documents_full SET title = 'doc v2' WHERE id = 1;
DELETE FROM inventory.documents WHERE id = 1;

-- Awkward names.
INSERT INTO "Sales Ö"."Order-Items" VALUES (1, 3.50, 'first', 'Mixed', 'naïve');
UPDATE "Sales Ö"."Order-Items" SET "MixedCase" = 'mixed again' WHERE "Id" = 1;
DELETE FROM "Sales Ö"."Order-Items" WHERE "Id" = 1;

-- Secrets (masked / excluded in the filter modes).
INSERT INTO audit.secrets VALUES (1, 'tok-abcdefghijklmnop', '1234');
UPDATE audit.secrets SET pin = '4321' WHERE id = 1;

-- TRUNCATE: one table, two tables, CASCADE, RESTART IDENTITY.
INSERT INTO audit.parent (label) VALUES ('p1'), ('p2');
INSERT INTO audit.child VALUES (1, 1), (2, 2);
TRUNCATE inventory.raw_inserts;
TRUNCATE audit.parent CASCADE;
INSERT INTO audit.parent (label) VALUES ('p3');
TRUNCATE audit.parent, audit.child RESTART IDENTITY;

-- Schema change mid-stream: add, retype, drop a column; the Relation message is re-sent.
INSERT INTO inventory.evolving VALUES (1, 10, 'before alter');
ALTER TABLE inventory.evolving ADD COLUMN c numeric(6,2) DEFAULT 1.25;
INSERT INTO inventory.evolving VALUES (2, 20, 'after add', 2.50);
ALTER TABLE inventory.evolving ALTER COLUMN a TYPE bigint;
INSERT INTO inventory.evolving VALUES (3, 30000000000, 'after retype', NULL);
ALTER TABLE inventory.evolving DROP COLUMN b;
INSERT INTO inventory.evolving VALUES (4, 40, 4.00);
UPDATE inventory.evolving SET a = a + 1;
DELETE FROM inventory.evolving WHERE id = 1;

-- A rolled-back transaction (nothing may surface) and a savepoint rollback.
BEGIN;
INSERT INTO inventory.customers (id, first_name, last_name) VALUES (99, 'Ghost', 'Row');
ROLLBACK;
BEGIN;
INSERT INTO inventory.customers (id, first_name, last_name) VALUES (5, 'Kept', 'Row');
SAVEPOINT sp;
INSERT INTO inventory.customers (id, first_name, last_name) VALUES (98, 'Undone', 'Row');
ROLLBACK TO SAVEPOINT sp;
INSERT INTO inventory.customers (id, first_name, last_name) VALUES (6, 'Also', 'Kept');
COMMIT;
