-- Logical decoding messages and their source timestamps (issue 11, class 4):
-- a non-transactional message carries no commit time of its own; the connector
-- stamps it with the commit time of the last BEGIN it read. The first message is
-- sent before any transaction has been read.
--
-- @modes: default

SET client_min_messages = warning;

CREATE TABLE msg_t (id int PRIMARY KEY, v text);

-- @changes

SELECT pg_logical_emit_message(false, 'pre', 'before any transaction');
SELECT pg_sleep(0.2);
INSERT INTO msg_t VALUES (1, 'a');
SELECT pg_sleep(0.2);
SELECT pg_logical_emit_message(false, 'after', 'after the first commit');
SELECT pg_sleep(0.2);
BEGIN;
INSERT INTO msg_t VALUES (2, 'b');
SELECT pg_logical_emit_message(true, 'in', 'transactional');
SELECT pg_logical_emit_message(false, 'in-nontx', 'non-transactional inside a transaction');
SELECT pg_sleep(0.2);
INSERT INTO msg_t VALUES (3, 'c');
COMMIT;
SELECT pg_sleep(0.2);
SELECT pg_logical_emit_message(false, 'later', 'after the second commit');
SELECT pg_logical_emit_message(false, 'later', 'and again');
