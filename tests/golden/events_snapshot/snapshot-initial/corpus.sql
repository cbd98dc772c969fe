-- The initial snapshot (issue 13): rows inserted before the slots exist are read by
-- the connector's snapshot (snapshot.mode=initial) and by pgcdc-events capture
-- (--snapshot-mode initial, slot created with its exported snapshot); the changes
-- after it are streamed by both. Several tables (the markers first /
-- first_in_data_collection / true / last_in_data_collection / last), a table of one
-- row, an empty table, a table without a primary key, an enum, NULLs, text that needs
-- COPY's escapes, and a few types whose text form matters. Tables are snapshotted in
-- name order, the recorder's empty sentinel table among them: a_first comes before it
-- (so that one row is "first"), snap_one is last ("last"), snap_c holds one row in the
-- middle. No PostGIS: its spatial_ref_sys would be published (FOR ALL TABLES) and the
-- connector ignores it as a built-in table (table.ignore.builtin).
--
-- @modes: snapshot-initial
-- @extensions: hstore

SET client_min_messages = warning;

CREATE TYPE snap_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE snap_a (id int PRIMARY KEY, label text, mood snap_mood, amount numeric(10,2),
                     tags text[], doc jsonb, at timestamptz, raw bytea, flag boolean);
CREATE TABLE a_first (id int PRIMARY KEY, h hstore);
CREATE TABLE snap_b (k text PRIMARY KEY, n bigint);
CREATE TABLE snap_c (id int PRIMARY KEY);
CREATE TABLE snap_empty (id int PRIMARY KEY, v text);
CREATE TABLE snap_nokey (v text, w int);
CREATE TABLE snap_one (id smallint PRIMARY KEY, d date, t time, i interval, u uuid,
                       addr inet);

INSERT INTO snap_a VALUES
  (1, 'plain', 'ok', 12.50, '{a,"b c"}', '{"x": [1, null]}', '2026-01-02 03:04:05.678901+00',
   '\x00ff', true),
  (2, E'tab\there\nnewline \\ backslash', 'happy', -0.01, '{}', '"s"',
   '1999-12-31 23:59:59+00', '\x', false),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (4, 'ünïcødé ✓', 'sad', 99999999.99, '{NULL,"with \"quote\""}', '[]', 'infinity', '\x5c', true);
INSERT INTO a_first VALUES (1, 'a=>1, "b c"=>NULL'), (2, '');
INSERT INTO snap_c VALUES (42);
INSERT INTO snap_b SELECT 'k' || g, g::bigint * 1000000000 FROM generate_series(1, 5) g;
INSERT INTO snap_nokey VALUES ('dup', 1), ('dup', 1), (NULL, NULL);
INSERT INTO snap_one VALUES (7, '2026-02-28', '23:59:59.999999', '1 year 2 mons 3 days 04:05:06.7',
                            'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '10.0.0.1');

-- @changes

INSERT INTO snap_a (id, label) VALUES (5, 'streamed');
UPDATE snap_b SET n = -1 WHERE k = 'k1';
DELETE FROM snap_one WHERE id = 7;
INSERT INTO snap_empty VALUES (1, 'first row after the snapshot');
