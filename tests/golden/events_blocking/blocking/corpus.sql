-- Blocking snapshots (issue 21): the connector streams from slot dbz
-- (snapshot.mode=no_data); two execute-snapshot signals of type blocking are inserted
-- into the signalling table. The connector pauses the stream after each signal,
-- snapshots the listed tables with the initial snapshot's markers, then streams on.
-- Nothing changes the snapshotted tables after the first signal, so what each block
-- holds is deterministic; the changes before it are streamed before the first block.
-- The connector pauses the stream asynchronously (a signal is acted on a few messages
-- after it is read): the pause between the two signals lets the first block run before
-- the second signal is streamed, so that the order of the records is deterministic too
-- (without it, 3.6.3 streamed both signals, then took both blocks).
-- The tables: a single int key, a composite key with a text column, one table with an
-- additional condition (the blocking form: a whole SELECT), and one that streams only.
-- tests/adapters/test_blocking_golden.py runs `pgcdc-events capture` then `decode` on
-- the same setup and compares record by record.
--
-- @modes: blocking
-- @extensions: plpgsql
-- @wait-reads: 8

SET client_min_messages = warning;

CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL,
                              data varchar(2048) NULL);
CREATE TABLE blk_a (id int PRIMARY KEY, v text, at timestamptz);
CREATE TABLE blk_b (a int, b text, n numeric(6, 2), PRIMARY KEY (a, b));
CREATE TABLE blk_c (id int PRIMARY KEY, color text);
CREATE TABLE blk_stream (id int PRIMARY KEY, v int);

INSERT INTO blk_a SELECT g, 'v' || g, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 hour'
  FROM generate_series(1, 3) g;
INSERT INTO blk_b VALUES (2, 'b', 1.5), (1, 'y', 2.25), (1, 'x', NULL);
INSERT INTO blk_c VALUES (1, 'blue'), (2, 'red'), (3, 'blue'), (4, 'red');

-- @changes

INSERT INTO blk_stream VALUES (1, 1);
UPDATE blk_a SET v = 'changed' WHERE id = 2;
INSERT INTO debezium_signal VALUES ('blocking-1', 'execute-snapshot', '{"data-collections": ["public\\.blk_[ab]"], "type": "blocking"}');
SELECT pg_sleep(5);
INSERT INTO debezium_signal VALUES ('blocking-2', 'execute-snapshot', '{"data-collections": ["public.blk_c"], "type": "BLOCKING", "additional-conditions": [{"data-collection": "public.blk_c", "filter": "SELECT * FROM public.blk_c WHERE color = ''blue''"}]}');
