-- Capture types.jsonl: 32 rows
-- enum, hstore, domain and enum[] columns (Type messages); ALTER TABLE ADD COLUMN, DROP COLUMN and ALTER COLUMN TYPE between inserts (Relation re-sent)
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false)
-- pgoutput options: proto_version '1'
-- logical_decoding_work_mem: default (64MB)
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub')
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE EXTENSION hstore;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TABLE typed (id int PRIMARY KEY, m mood, h hstore, p posint, ms mood[]);
CREATE PUBLICATION "pub" FOR ALL TABLES;
SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, false);
INSERT INTO typed VALUES (1, 'ok', 'a=>1, b=>NULL', 5, '{sad,happy}');
ALTER TABLE typed ADD COLUMN extra text DEFAULT 'x';
INSERT INTO typed VALUES (2, 'happy', '', 6, '{}', 'y');
ALTER TABLE typed DROP COLUMN h;
INSERT INTO typed VALUES (3, 'sad', 7, NULL, NULL);
ALTER TABLE typed ALTER COLUMN p TYPE bigint;
INSERT INTO typed VALUES (4, NULL, 8, '{ok}', 'z');
UPDATE typed SET m = 'happy' WHERE id = 1;
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub');
