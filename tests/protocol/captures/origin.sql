-- Capture origin.jsonl: 16 rows
-- transactions with replication origin 'origin_x' (with and without pg_replication_origin_xact_setup) between local ones
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false)
-- pgoutput options: proto_version '1'
-- logical_decoding_work_mem: default (64MB)
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub')
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE TABLE replicated (id int PRIMARY KEY, v text);
CREATE PUBLICATION "pub" FOR ALL TABLES;
SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false);
INSERT INTO replicated VALUES (1, 'local');
SELECT pg_replication_origin_create('origin_x');
SELECT pg_replication_origin_session_setup('origin_x');
BEGIN;
SELECT pg_replication_origin_xact_setup('0/ABCDEF', '2024-01-02 03:04:05.678901+00');
INSERT INTO replicated VALUES (2, 'from origin_x');
UPDATE replicated SET v = 'changed by origin_x' WHERE id = 1;
COMMIT;
INSERT INTO replicated VALUES (3, 'origin session, no xact_setup');
SELECT pg_replication_origin_session_reset();
INSERT INTO replicated VALUES (4, 'local again');
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub');
