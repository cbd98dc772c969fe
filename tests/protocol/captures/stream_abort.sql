-- Capture stream_abort.jsonl: 83 rows
-- streamed transactions that roll back entirely (Stream Abort, subxid = xid): the first with an empty segment, the second, after a small committed transaction, with rows; then one whose streamed savepoint is rolled back (Stream Abort, subxid != xid) and which then commits with a released savepoint
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s_abort', 'pgoutput', false, false)
-- pgoutput options: proto_version '2', streaming 'true'
-- logical_decoding_work_mem: 64kB
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_abort', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub_abort', 'streaming', 'true')
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE TABLE filler (id int, pad text);
CREATE TABLE big (id int PRIMARY KEY, v text);
CREATE TABLE small (id int PRIMARY KEY, v text);
CREATE PUBLICATION "pub_abort" FOR TABLE big, small;
SELECT lsn::text FROM pg_create_logical_replication_slot('s_abort', 'pgoutput', false, false);
BEGIN;
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1001, 1020) g;
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
ROLLBACK;
BEGIN;
INSERT INTO big VALUES (1000, 'warm-up');
INSERT INTO small VALUES (1000, 'warm-up');
COMMIT;
BEGIN;
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1101, 1120) g;
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1121, 1140) g;
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
ROLLBACK;
BEGIN;
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(2001, 2010) g;
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
SAVEPOINT sp1;
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(2011, 2020) g;
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
INSERT INTO small VALUES (10, 'in the rolled-back savepoint');
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
ROLLBACK TO SAVEPOINT sp1;
SAVEPOINT sp2;
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(2021, 2030) g;
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
RELEASE SAVEPOINT sp2;
COMMIT;
SET logical_decoding_work_mem = '64kB';
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_abort', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub_abort', 'streaming', 'true');
RESET logical_decoding_work_mem;
