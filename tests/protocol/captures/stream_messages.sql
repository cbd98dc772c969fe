-- Capture stream_messages.jsonl: 26 rows
-- messages 'true' with streaming: transactional messages inside a streamed transaction, a non-transactional one emitted from inside it, and a small non-streamed transactional message
-- Server: PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit
-- Slot: pgoutput, two_phase=false: SELECT lsn::text FROM pg_create_logical_replication_slot('s_msg', 'pgoutput', false, false)
-- pgoutput options: proto_version '2', messages 'true', streaming 'true'
-- logical_decoding_work_mem: 64kB
-- Decoded with: SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_msg', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub_msg', 'messages', 'true', 'streaming', 'true')
-- The statements that produced it follow in order (captures of the same scenario may share some).

CREATE TABLE filler (id int, pad text);
CREATE TABLE big (id int PRIMARY KEY, v text);
CREATE TABLE small (id int PRIMARY KEY, v text);
CREATE PUBLICATION "pub_msg" FOR TABLE big, small;
SELECT lsn::text FROM pg_create_logical_replication_slot('s_msg', 'pgoutput', false, false);
BEGIN;
SELECT pg_logical_emit_message(true, 'stream', 'first in the stream');
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(5001, 5005) g;
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
SELECT pg_logical_emit_message(true, 'stream', 'transactional, second segment');
SELECT pg_logical_emit_message(false, 'stream-nontx', 'non-transactional');
INSERT INTO big SELECT g, 'row ' || g FROM generate_series(5011, 5015) g;
INSERT INTO filler SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g;
COMMIT;
SELECT pg_logical_emit_message(true, 'small', 'not streamed');
SET logical_decoding_work_mem = '64kB';
SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_get_binary_changes('s_msg', NULL, NULL, 'proto_version', '2', 'publication_names', 'pub_msg', 'messages', 'true', 'streaming', 'true');
RESET logical_decoding_work_mem;
