-- Capture toast.jsonl: 20 rows
-- an 8640-byte md5-hex text column stored EXTERNAL: insert, update of another column (unchanged TOAST 'u'), delete; on REPLICA IDENTITY DEFAULT then FULL
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false)
-- pgoutput options: proto_version '1'
-- logical_decoding_work_mem: default (64MB)
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub')
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE TABLE toast_default (id int PRIMARY KEY, counter int, doc text);
ALTER TABLE toast_default ALTER COLUMN doc SET STORAGE EXTERNAL;
ALTER TABLE toast_default REPLICA IDENTITY DEFAULT;
CREATE TABLE toast_full (id int PRIMARY KEY, counter int, doc text);
ALTER TABLE toast_full ALTER COLUMN doc SET STORAGE EXTERNAL;
ALTER TABLE toast_full REPLICA IDENTITY FULL;
CREATE PUBLICATION "pub" FOR ALL TABLES;
SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false);
INSERT INTO toast_default VALUES (1, 0, (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 270) g));
UPDATE toast_default SET counter = counter + 1 WHERE id = 1;
DELETE FROM toast_default WHERE id = 1;
INSERT INTO toast_full VALUES (1, 0, (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 270) g));
UPDATE toast_full SET counter = counter + 1 WHERE id = 1;
DELETE FROM toast_full WHERE id = 1;
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub');
