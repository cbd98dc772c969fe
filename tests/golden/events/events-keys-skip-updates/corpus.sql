-- Events corpus: envelope-level behaviour rather than types — deletes and
-- tombstones, primary-key changes, multi-statement and rolled-back transactions,
-- savepoints, TRUNCATE, logical decoding messages, tables without a primary key,
-- REPLICA IDENTITY variants, and columns for filters, masking and key overrides.
--
-- Recorded by tools/record_debezium/record.py (see types.sql for the format).
--
-- @modes: events-*

SET client_min_messages = warning;

CREATE TABLE ev_main (
    id     int PRIMARY KEY,
    name   text,
    secret text,
    email  varchar(100),
    amount numeric(10,2),
    note   text
);
-- REPLICA IDENTITY FULL: updates and deletes carry every old value.
CREATE TABLE ev_full (id int PRIMARY KEY, val text, n int);
ALTER TABLE ev_full REPLICA IDENTITY FULL;
-- Identity through a unique index (not the primary key).
CREATE TABLE ev_index (id int PRIMARY KEY, code text NOT NULL, val text);
CREATE UNIQUE INDEX ev_index_code ON ev_index (code);
ALTER TABLE ev_index REPLICA IDENTITY USING INDEX ev_index_code;
-- No primary key: REPLICA IDENTITY FULL so updates/deletes are published
-- (message.key.columns can give it a key).
CREATE TABLE ev_nokey (code text, val text);
ALTER TABLE ev_nokey REPLICA IDENTITY FULL;
-- Composite primary key.
CREATE TABLE ev_composite (a int, b text, val text, PRIMARY KEY (a, b));
CREATE TABLE ev_trunc (id int PRIMARY KEY, val text);
CREATE TABLE ev_trunc2 (id int PRIMARY KEY, val text);
CREATE TABLE ev_other (id int PRIMARY KEY, val text);

-- @changes

-- Plain insert / update / delete (default identity: delete carries the key only).
INSERT INTO ev_main VALUES (1, 'alice', 's3cr3t', 'alice@example.com', 10.50, 'first');
INSERT INTO ev_main VALUES (2, 'bob', 'hunter2', 'bob@example.com', 20.00, NULL);
UPDATE ev_main SET amount = 11.00, note = 'changed' WHERE id = 1;
DELETE FROM ev_main WHERE id = 2;

-- Primary key change: Debezium emits a delete (+ tombstone) and a create.
UPDATE ev_main SET id = 10 WHERE id = 1;

-- Multi-statement transaction touching several tables.
BEGIN;
INSERT INTO ev_full VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3);
UPDATE ev_full SET n = n + 10 WHERE id <= 2;
DELETE FROM ev_full WHERE id = 3;
INSERT INTO ev_other VALUES (1, 'other');
COMMIT;

-- Rolled back work, and a savepoint rolled back inside a committed transaction.
BEGIN;
INSERT INTO ev_other VALUES (2, 'rolled back');
ROLLBACK;
BEGIN;
INSERT INTO ev_other VALUES (3, 'kept');
SAVEPOINT sp;
INSERT INTO ev_other VALUES (4, 'undone');
ROLLBACK TO SAVEPOINT sp;
UPDATE ev_other SET val = 'kept, updated' WHERE id = 3;
COMMIT;

-- Identity via a unique index: the key of old tuples is the index column.
INSERT INTO ev_index VALUES (1, 'A', 'x');
UPDATE ev_index SET val = 'y' WHERE id = 1;
UPDATE ev_index SET code = 'B' WHERE id = 1;
DELETE FROM ev_index WHERE id = 1;

-- No primary key.
INSERT INTO ev_nokey VALUES ('k1', 'v1'), ('k2', 'v2');
UPDATE ev_nokey SET val = 'v1b' WHERE code = 'k1';
DELETE FROM ev_nokey WHERE code = 'k2';

-- Composite key, including a change of one key part.
INSERT INTO ev_composite VALUES (1, 'x', 'v');
UPDATE ev_composite SET val = 'w' WHERE a = 1 AND b = 'x';
UPDATE ev_composite SET b = 'y' WHERE a = 1 AND b = 'x';
DELETE FROM ev_composite WHERE a = 1;

-- Logical decoding messages: transactional and not, two prefixes, binary content.
SELECT pg_logical_emit_message(true, 'pgcdc', 'transactional payload');
SELECT pg_logical_emit_message(false, 'pgcdc', 'non-transactional payload');
SELECT pg_logical_emit_message(true, 'other', '\x00ff'::bytea);
BEGIN;
INSERT INTO ev_other VALUES (5, 'with message');
SELECT pg_logical_emit_message(true, 'pgcdc', 'inside a transaction');
COMMIT;

-- TRUNCATE: one table, then two in one statement, then CASCADE-free RESTART IDENTITY.
INSERT INTO ev_trunc VALUES (1, 'a'), (2, 'b');
INSERT INTO ev_trunc2 VALUES (1, 'c');
TRUNCATE ev_trunc;
INSERT INTO ev_trunc VALUES (3, 'd');
TRUNCATE ev_trunc, ev_trunc2;
TRUNCATE ev_trunc RESTART IDENTITY;

-- A delete after everything else, on the main table.
DELETE FROM ev_main WHERE id = 10;
