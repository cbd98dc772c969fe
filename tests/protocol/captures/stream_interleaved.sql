-- Capture stream_interleaved.jsonl: 52 rows
-- two large transactions from two sessions whose stream segments interleave; the second one commits first
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s_inter', 'pgoutput', false, false)
-- pgoutput options: proto_version '2', streaming 'true'
-- logical_decoding_work_mem: 64kB
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_inter', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub_inter', 'streaming', 'true')
-- Statements are prefixed with the session (connection) that ran them.
-- The statements that produced it follow in order (captures of the same scenario may share some).

/* session A */ CREATE TABLE filler (id int, pad text);
/* session A */ CREATE TABLE big (id int PRIMARY KEY, v text);
/* session A */ CREATE TABLE small (id int PRIMARY KEY, v text);
/* session A */ CREATE PUBLICATION "pub_inter" FOR TABLE big, small;
/* session A */ SELECT lsn::text FROM pg_create_logical_replication_slot('s_inter', 'pgoutput', false, false);
/* session A */ BEGIN;
/* session B */ BEGIN;
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(3001, 3005) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 60) g;
/* session B */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(4001, 4005) g;
/* session B */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 60) g;
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(3011, 3015) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 60) g;
/* session B */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(4011, 4015) g;
/* session B */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 60) g;
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(3021, 3025) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 60) g;
/* session B */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(4021, 4025) g;
/* session B */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 60) g;
/* session B */ COMMIT;
/* session A */ COMMIT;
/* session A */ SET logical_decoding_work_mem = '64kB';
/* session A */ SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_inter', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub_inter', 'streaming', 'true');
/* session A */ RESET logical_decoding_work_mem;
