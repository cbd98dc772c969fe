-- Capture stream_commit.jsonl: 85 rows
-- a large transaction streamed in several segments (inserts into an unpublished filler table push it over 64kB) that commits; a small transaction commits from another session while it is open
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s_commit', 'pgoutput', false, false)
-- pgoutput options: proto_version '2', streaming 'true'
-- logical_decoding_work_mem: 64kB
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_commit', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub', 'streaming', 'true')
-- Statements are prefixed with the session (connection) that ran them.
-- The statements that produced it follow in order (captures of the same scenario may share some).

/* session A */ CREATE TABLE filler (id int, pad text);
/* session A */ CREATE TABLE big (id int PRIMARY KEY, v text);
/* session A */ CREATE TABLE small (id int PRIMARY KEY, v text);
/* session A */ CREATE PUBLICATION "pub" FOR TABLE big, small;
/* session A */ SELECT lsn::text FROM pg_create_logical_replication_slot('s_commit', 'pgoutput', false, false);
/* session A */ BEGIN;
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1, 20) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
/* session B */ INSERT INTO small VALUES (1, 'small committed while big is open');
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(21, 40) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(41, 60) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
/* session A */ UPDATE big SET v = 'updated' WHERE id <= 3;
/* session A */ DELETE FROM big WHERE id = 4;
/* session A */ COMMIT;
/* session B */ INSERT INTO small VALUES (2, 'after');
/* session A */ SET logical_decoding_work_mem = '64kB';
/* session A */ SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_commit', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub', 'streaming', 'true');
/* session A */ RESET logical_decoding_work_mem;
