-- Capture two_phase.jsonl: 90 rows
-- two_phase slot, proto_version 3, streaming: PREPARE + COMMIT PREPARED, PREPARE + ROLLBACK PREPARED, a plain commit while both are prepared, and two large streamed prepared transactions (Stream Prepare), one committed from another session, one rolled back
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=true: SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, true)
-- pgoutput options: proto_version '3', streaming 'true', two_phase 'true'
-- logical_decoding_work_mem: 64kB
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '3', 'publication_names', 'pub', 'streaming', 'true', 'two_phase', 'true')
-- Two-phase on PG15: the slot's two_phase flag (4th argument of pg_create_logical_replication_slot) alone enables b/P/K/r/p, even with proto_version 1 and without the two_phase option; the option ('two_phase' 'true') needs proto_version >= 3 and, on a slot without the flag, turns the flag on permanently (even with peek).
-- Statements are prefixed with the session (connection) that ran them.
-- The statements that produced it follow in order (captures of the same scenario may share some).

/* session A */ CREATE TABLE filler (id int, pad text);
/* session A */ CREATE TABLE big (id int PRIMARY KEY, v text);
/* session A */ CREATE TABLE small (id int PRIMARY KEY, v text);
/* session A */ CREATE PUBLICATION "pub" FOR TABLE big, small;
/* session A */ SELECT lsn::text FROM pg_create_logical_replication_slot('s', 'pgoutput', false, true);
/* session A */ BEGIN;
/* session A */ INSERT INTO small VALUES (1, 'prepared then committed');
/* session A */ PREPARE TRANSACTION 'gid-commit';
/* session A */ BEGIN;
/* session A */ INSERT INTO small VALUES (2, 'prepared then rolled back');
/* session A */ PREPARE TRANSACTION 'gid-rollback';
/* session A */ INSERT INTO small VALUES (3, 'plain commit while two are prepared');
/* session A */ COMMIT PREPARED 'gid-commit';
/* session A */ ROLLBACK PREPARED 'gid-rollback';
/* session A */ BEGIN;
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(100, 119) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(120, 139) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
/* session A */ PREPARE TRANSACTION 'gid-stream';
/* session B */ COMMIT PREPARED 'gid-stream';
/* session A */ BEGIN;
/* session A */ INSERT INTO big SELECT g, 'row ' || g FROM generate_series(200, 219) g;
/* session A */ INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
/* session A */ PREPARE TRANSACTION 'gid-stream-rb';
/* session A */ ROLLBACK PREPARED 'gid-stream-rb';
/* session A */ SET logical_decoding_work_mem = '64kB';
/* session A */ SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '3', 'publication_names', 'pub', 'streaming', 'true', 'two_phase', 'true');
/* session A */ RESET logical_decoding_work_mem;
