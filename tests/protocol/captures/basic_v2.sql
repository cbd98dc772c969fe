-- Capture basic_v2.jsonl: 94 rows
-- insert/update/delete with a primary key; multi-row and multi-statement transactions; NULLs; quoted non-ASCII identifiers; no-PK tables (DEFAULT: inserts only, FULL); REPLICA IDENTITY DEFAULT/FULL/NOTHING/USING INDEX with identity-changing and -preserving updates and deletes (proto_version 2)
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s_v2', 'pgoutput', false, false)
-- pgoutput options: proto_version '2'
-- logical_decoding_work_mem: default (64MB)
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_v2', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub,pub_ins')
-- Note: Identical to basic_v1 byte for byte: without streaming or two-phase, proto_version 2 and 3 change nothing on the wire.
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE TABLE items (id int PRIMARY KEY, name text, qty int, price numeric(10,2));
CREATE SCHEMA "Sales Ö";
CREATE TABLE "Sales Ö"."Order-Items" ("Id" bigint PRIMARY KEY, "Ünit Price" numeric, "Mixed Case" text, plain text);
CREATE TABLE nopk_default (a int, b text);
CREATE TABLE nopk_full (a int, b text);
ALTER TABLE nopk_full REPLICA IDENTITY FULL;
CREATE TABLE ri_default (id int PRIMARY KEY, code text NOT NULL, val text);
CREATE TABLE ri_full (id int PRIMARY KEY, code text NOT NULL, val text);
ALTER TABLE ri_full REPLICA IDENTITY FULL;
CREATE TABLE ri_nothing (id int PRIMARY KEY, code text NOT NULL, val text);
ALTER TABLE ri_nothing REPLICA IDENTITY NOTHING;
CREATE TABLE ri_index (id int PRIMARY KEY, code text NOT NULL, region text NOT NULL, val text);
CREATE UNIQUE INDEX ri_index_code_region ON ri_index (code, region);
ALTER TABLE ri_index REPLICA IDENTITY USING INDEX ri_index_code_region;
CREATE PUBLICATION pub_ins FOR TABLE ri_nothing, nopk_default WITH (publish = 'insert');
CREATE PUBLICATION "pub" FOR TABLE items, "Sales Ö"."Order-Items", nopk_full, ri_default, ri_full, ri_index;
SELECT lsn::text FROM pg_create_logical_replication_slot('s_v1', 'pgoutput', false, false);
SELECT lsn::text FROM pg_create_logical_replication_slot('s_v2', 'pgoutput', false, false);
SELECT lsn::text FROM pg_create_logical_replication_slot('s_v3', 'pgoutput', false, false);
INSERT INTO items VALUES (1, 'apple', 3, 1.50);
UPDATE items SET qty = 4 WHERE id = 1;
DELETE FROM items WHERE id = 1;
INSERT INTO items VALUES (2, 'pear', NULL, 2.25), (3, NULL, 7, NULL), (4, 'fig', 1, 0.99);
BEGIN;
INSERT INTO items VALUES (5, 'kiwi', 10, 0.30);
UPDATE items SET price = NULL, name = 'Kiwi' WHERE id = 5;
UPDATE items SET id = 50 WHERE id = 5;
DELETE FROM items WHERE id IN (2, 3);
COMMIT;
INSERT INTO "Sales Ö"."Order-Items" VALUES (1, 12.5, 'Ünïcødé ✓', NULL);
UPDATE "Sales Ö"."Order-Items" SET "Ünit Price" = 13 WHERE "Id" = 1;
DELETE FROM "Sales Ö"."Order-Items" WHERE "Id" = 1;
INSERT INTO nopk_default VALUES (1, 'one'), (NULL, NULL);
INSERT INTO nopk_full VALUES (1, 'one'), (2, NULL);
UPDATE nopk_full SET b = 'uno' WHERE a = 1;
DELETE FROM nopk_full WHERE a = 2;
UPDATE nopk_default SET b = 'not sent' WHERE a = 1;
INSERT INTO ri_default VALUES (1, 'c1', 'v1');
UPDATE ri_default SET val = 'v2' WHERE id = 1;
UPDATE ri_default SET id = 2 WHERE id = 1;
DELETE FROM ri_default WHERE id = 2;
INSERT INTO ri_full VALUES (1, 'c1', 'v1');
UPDATE ri_full SET val = 'v2' WHERE id = 1;
UPDATE ri_full SET id = 2 WHERE id = 1;
DELETE FROM ri_full WHERE id = 2;
INSERT INTO ri_nothing VALUES (1, 'c1', 'v1');
UPDATE ri_nothing SET val = 'v2' WHERE id = 1;
UPDATE ri_nothing SET id = 2 WHERE id = 1;
DELETE FROM ri_nothing WHERE id = 2;
INSERT INTO ri_index VALUES (1, 'c1', 'eu', 'v1');
UPDATE ri_index SET val = 'v2' WHERE id = 1;
UPDATE ri_index SET id = 2 WHERE id = 1;
UPDATE ri_index SET region = 'us' WHERE id = 2;
DELETE FROM ri_index WHERE id = 2;
ALTER PUBLICATION pub_ins SET (publish = 'insert, update, delete');
-- fails: cannot update table "nopk_default" because it does not have a replica identity and publishes updates
-- UPDATE nopk_default SET b = 'x'
-- fails: cannot delete from table "nopk_default" because it does not have a replica identity and publishes deletes
-- DELETE FROM nopk_default
-- fails: cannot update table "ri_nothing" because it does not have a replica identity and publishes updates
-- UPDATE ri_nothing SET val = 'v3'
-- fails: cannot delete from table "ri_nothing" because it does not have a replica identity and publishes deletes
-- DELETE FROM ri_nothing
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_v1', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub,pub_ins');
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_v2', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub,pub_ins');
