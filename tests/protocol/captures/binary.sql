-- Capture binary.jsonl: 16 rows
-- binary 'true': int, text, numeric, timestamptz, bytea, uuid, bool, arrays, enum, hstore, composite, aclitem (no send function, falls back to text), float8, date, jsonb
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false)
-- pgoutput options: proto_version '1', binary 'true'
-- logical_decoding_work_mem: default (64MB)
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub', 'binary', 'true')
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE EXTENSION hstore;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE pair AS (x int, label text);
CREATE TABLE bin (id int PRIMARY KEY, i8 bigint, t text, n numeric, ts timestamptz, by bytea, u uuid, b bool, ia int[], ta text[], m mood, h hstore, pr pair, acl aclitem, f8 float8, d date, j jsonb);
CREATE PUBLICATION "pub" FOR ALL TABLES;
SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false);
INSERT INTO bin VALUES (1, -9000000000, 'héllo', 12345.678900, '2024-02-29 12:34:56.789012+00', '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, '{1,NULL,3}', '{a,"b c"}', 'happy', 'k=>v', ROW(7, 'seven'), 'postgres=r/postgres', 'NaN', '2000-01-01', '{"a": [1, 2]}');
INSERT INTO bin (id) VALUES (2);
UPDATE bin SET n = 'NaN', b = false, ts = '-infinity' WHERE id = 1;
DELETE FROM bin WHERE id = 2;
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub', 'binary', 'true');
