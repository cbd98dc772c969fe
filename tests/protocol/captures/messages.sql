-- Capture messages.jsonl: 22 rows
-- messages 'true': transactional and non-transactional pg_logical_emit_message with text, bytea and empty prefix/content, one between DML in a transaction, non-transactional ones inside a transaction that rolls back
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false)
-- pgoutput options: proto_version '1', messages 'true'
-- logical_decoding_work_mem: default (64MB)
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub', 'messages', 'true')
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE TABLE notes (id int PRIMARY KEY, v text);
CREATE PUBLICATION "pub" FOR ALL TABLES;
SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false);
SELECT pg_logical_emit_message(true, 'tx-text', 'transactional text');
SELECT pg_logical_emit_message(false, 'nontx-text', 'non-transactional text');
SELECT pg_logical_emit_message(true, 'tx-bytea', '\x00ff0102'::bytea);
SELECT pg_logical_emit_message(false, 'nontx-bytea', '\x'::bytea);
SELECT pg_logical_emit_message(true, '', '');
BEGIN;
INSERT INTO notes VALUES (1, 'a');
SELECT pg_logical_emit_message(true, 'with-dml', 'between inserts');
INSERT INTO notes VALUES (2, 'b');
COMMIT;
BEGIN;
SELECT pg_logical_emit_message(false, 'nontx-no-xid', 'before any write');
INSERT INTO notes VALUES (3, 'c');
SELECT pg_logical_emit_message(false, 'nontx-rolled-back', 'survives the rollback');
SELECT pg_logical_emit_message(true, 'tx-rolled-back', 'never decoded');
ROLLBACK;
INSERT INTO notes VALUES (4, 'flushes the WAL');
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub', 'messages', 'true');
