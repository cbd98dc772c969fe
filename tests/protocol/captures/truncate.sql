-- Capture truncate.jsonl: 57 rows
-- TRUNCATE of one table, of two tables, CASCADE over an FK chain, RESTART IDENTITY, both, and TRUNCATE between inserts in a transaction
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false)
-- pgoutput options: proto_version '1'
-- logical_decoding_work_mem: default (64MB)
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub')
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE TABLE t1 (id serial PRIMARY KEY, v text);
CREATE TABLE t2 (id int PRIMARY KEY);
CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent);
CREATE TABLE grandchild (id int PRIMARY KEY, child_id int REFERENCES child);
CREATE PUBLICATION "pub" FOR ALL TABLES;
SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false);
INSERT INTO t1 (v) VALUES ('a'), ('b');
TRUNCATE t1;
INSERT INTO t2 VALUES (1);
TRUNCATE t1, t2;
INSERT INTO parent VALUES (1);
INSERT INTO child VALUES (1, 1);
INSERT INTO grandchild VALUES (1, 1);
TRUNCATE parent CASCADE;
INSERT INTO t1 (v) VALUES ('c');
TRUNCATE t1 RESTART IDENTITY;
TRUNCATE parent RESTART IDENTITY CASCADE;
BEGIN;
INSERT INTO t2 VALUES (2);
TRUNCATE t2;
INSERT INTO t2 VALUES (3);
COMMIT;
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub');
