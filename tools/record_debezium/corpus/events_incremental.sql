-- Ad hoc incremental snapshots (issue 21): the connector streams from slot dbz
-- (snapshot.mode=no_data) while signal rows, inserted into the signalling table, ask it
-- to re-read tables in key-ordered chunks of 2; no other change runs meanwhile, so the
-- windows are deterministic and tests/adapters/test_incremental_golden.py drives
-- pgcdc-events' IncrementalSnapshotter on the same setup and compares record by record.
-- The tables: a single int key; a composite key; a composite key whose message key is
-- reordered (message.key.columns b,a); a table without a primary key whose
-- message.key.columns hold NULLs (the connector's OR form of the chunk query); an enum
-- key (enum order is not name order); an empty table; a filter
-- (additional-conditions); a surrogate key (surrogate-key, ordering unlike the primary
-- key); a numeric key with NaN and the infinities (its own signal, last: the fix of
-- debezium/dbz#2333 is on the 3.6 branch after 3.6.1; decimal.handling.mode=string as
-- in that fix's test). No PostGIS: spatial_ref_sys would be published.
--
-- @modes: incremental-*
-- @extensions: plpgsql
-- @wait-reads: 35

SET client_min_messages = warning;

CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL,
                              data varchar(2048) NULL);
CREATE TYPE inc_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE inc_single (id int PRIMARY KEY, v text, at timestamptz);
CREATE TABLE inc_composite (a int, b text, v int, PRIMARY KEY (a, b));
CREATE TABLE inc_keycols (a int, b int, c text, PRIMARY KEY (a, b));
CREATE TABLE inc_nokey (a int, b int, c text);
CREATE TABLE inc_enum (mood inc_mood PRIMARY KEY, n int);
CREATE TABLE inc_empty (id int PRIMARY KEY);
CREATE TABLE inc_filtered (id int PRIMARY KEY, color text);
CREATE TABLE inc_surrogate (id int PRIMARY KEY, sk int NOT NULL UNIQUE, v text);
CREATE TABLE inc_numeric (id numeric PRIMARY KEY, v int);

INSERT INTO inc_single SELECT g, 'v' || g, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 hour'
  FROM generate_series(1, 5) g;
INSERT INTO inc_composite VALUES (2, 'b', 5), (1, 'y', 2), (10, 'b', 4), (1, 'x', 1), (2, 'a', 3);
INSERT INTO inc_keycols VALUES (1, 2, 'one-two'), (2, 1, 'two-one'), (1, 1, 'one-one');
INSERT INTO inc_nokey VALUES (1, 1, 'a'), (1, NULL, 'b'), (2, NULL, 'c'), (NULL, 3, 'd');
INSERT INTO inc_enum VALUES ('happy', 3), ('sad', 1), ('ok', 2);
INSERT INTO inc_filtered VALUES (1, 'blue'), (2, 'red'), (3, 'blue'), (4, NULL), (5, 'blue'),
  (6, 'red');
INSERT INTO inc_surrogate VALUES (1, 40, 'a'), (2, 30, 'b'), (3, 20, 'c'), (4, 10, 'd');
INSERT INTO inc_numeric VALUES ('NaN', 7), ('Infinity', 6), ('-Infinity', 1), (0, 3),
  (-1.5, 2), (2.25, 4), (10, 5);

-- @changes

INSERT INTO debezium_signal VALUES ('ad-hoc-1', 'execute-snapshot', '{"data-collections": ["public.inc_single", "public.inc_composite", "public.inc_keycols", "public.inc_nokey", "public.inc_enum", "public.inc_empty"], "type": "incremental"}');
INSERT INTO debezium_signal VALUES ('ad-hoc-2', 'execute-snapshot', '{"data-collections": ["public.inc_filtered"], "additional-conditions": [{"data-collection": "public.inc_filtered", "filter": "color = ''blue'' OR color IS NULL"}]}');
INSERT INTO debezium_signal VALUES ('ad-hoc-3', 'execute-snapshot', '{"data-collections": ["public.inc_surrogate"], "surrogate-key": "sk"}');
INSERT INTO debezium_signal VALUES ('ad-hoc-4', 'execute-snapshot', '{"data-collections": ["public.inc_numeric"]}');
