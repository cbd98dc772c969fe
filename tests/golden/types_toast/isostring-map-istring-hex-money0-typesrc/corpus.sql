-- Types corpus, TOAST part: large out-of-line values left unchanged by UPDATEs.
--
-- Recorded by tools/record_debezium/record.py (see types.sql for the format).
-- Two identical tables: t_toast_default (REPLICA IDENTITY DEFAULT, so pgoutput
-- sends unchanged TOASTed values as 'u' markers and Debezium substitutes its
-- placeholder) and t_toast_full (REPLICA IDENTITY FULL). Every value is > 8 kB
-- of poorly compressible, deterministic data (md5 of a counter) stored
-- EXTERNAL (out of line, uncompressed). Kept apart from types.sql because the
-- images are large (~240 kB each); the four modes below cover every
-- unavailable.value.placeholder, binary.handling.mode, hstore.handling.mode
-- and decimal.handling.mode value.
--
-- @modes: default amicros-double-map-istring-base64-ph-colsrc connect-string-b64url-hexph-unknown
-- @modes: isostring-map-istring-hex-money0-typesrc

SET client_min_messages = warning;

-- Large out-of-line TOAST values: identical layout, REPLICA IDENTITY DEFAULT
-- (unchanged values arrive as pgoutput 'u' markers) and FULL.
CREATE TABLE t_toast_default (
    id       int PRIMARY KEY,
    note     text,
    c_text   text,
    c_varchar varchar,
    c_bytea  bytea,
    c_json   json,
    c_jsonb  jsonb,
    c_xml    xml,
    c_hstore hstore,
    c_int4a  int4[],
    c_int8a  int8[],
    c_texta  text[],
    c_datea  date[],
    c_uuida  uuid[],
    c_byteaa bytea[],
    c_jsona  json[],
    c_numeric numeric,
    c_geom   geometry
);
ALTER TABLE t_toast_default
    ALTER COLUMN c_text SET STORAGE EXTERNAL, ALTER COLUMN c_varchar SET STORAGE EXTERNAL,
    ALTER COLUMN c_bytea SET STORAGE EXTERNAL, ALTER COLUMN c_json SET STORAGE EXTERNAL,
    ALTER COLUMN c_jsonb SET STORAGE EXTERNAL, ALTER COLUMN c_xml SET STORAGE EXTERNAL,
    ALTER COLUMN c_hstore SET STORAGE EXTERNAL, ALTER COLUMN c_int4a SET STORAGE EXTERNAL,
    ALTER COLUMN c_int8a SET STORAGE EXTERNAL, ALTER COLUMN c_texta SET STORAGE EXTERNAL,
    ALTER COLUMN c_datea SET STORAGE EXTERNAL, ALTER COLUMN c_uuida SET STORAGE EXTERNAL,
    ALTER COLUMN c_byteaa SET STORAGE EXTERNAL, ALTER COLUMN c_jsona SET STORAGE EXTERNAL,
    ALTER COLUMN c_numeric SET STORAGE EXTERNAL, ALTER COLUMN c_geom SET STORAGE EXTERNAL;
CREATE TABLE t_toast_full (LIKE t_toast_default INCLUDING ALL);
ALTER TABLE t_toast_full REPLICA IDENTITY FULL;

-- Deterministic, poorly compressible big values (> 8 kB each; md5 of a counter).
CREATE FUNCTION big_hex(n int, salt text) RETURNS text LANGUAGE sql IMMUTABLE AS
    $$ SELECT string_agg(md5(salt || i::text), '') FROM generate_series(1, n) i $$;


-- @changes

-- ---------------------------------------------------------------- TOAST
INSERT INTO t_toast_default
SELECT 1, 'original',
    big_hex(300, 't'),
    big_hex(300, 'v'),
    decode(big_hex(300, 'b'), 'hex'),
    (SELECT json_agg(md5('j' || i))::text FROM generate_series(1, 300) i)::json,
    (SELECT jsonb_agg(md5('jb' || i)) FROM generate_series(1, 300) i),
    ('<r>' || big_hex(300, 'x') || '</r>')::xml,
    (SELECT hstore(array_agg('k' || i), array_agg(md5('h' || i))) FROM generate_series(1, 250) i),
    (SELECT array_agg(hashtext('i4' || i)) FROM generate_series(1, 2500) i),
    (SELECT array_agg(hashtext('i8' || i)::int8 * 1000003) FROM generate_series(1, 1200) i),
    (SELECT array_agg(md5('ta' || i)) FROM generate_series(1, 300) i),
    (SELECT array_agg(date '2000-01-01' + i) FROM generate_series(1, 2200) i),
    (SELECT array_agg(md5('u' || i)::uuid) FROM generate_series(1, 600) i),
    ARRAY[decode(big_hex(190, 'ba1'), 'hex'), decode(big_hex(190, 'ba2'), 'hex'), decode(big_hex(190, 'ba3'), 'hex')],
    (SELECT array_agg(json_build_object('k', md5('ja' || i))) FROM generate_series(1, 300) i),
    (SELECT string_agg(lpad(abs(hashtext('n' || i))::text, 10, '0'), '') FROM generate_series(1, 2000) i)::numeric / 1e10,
    (SELECT ST_MakeLine(array_agg(ST_MakePoint(i, i * 2))) FROM generate_series(1, 700) i);
INSERT INTO t_toast_full SELECT * FROM t_toast_default WHERE id = 1;
-- Only a small column changes: every big column is unchanged ('u' in the new tuple).
UPDATE t_toast_default SET note = 'changed' WHERE id = 1;
UPDATE t_toast_full SET note = 'changed' WHERE id = 1;
-- One big column changes, the others stay unchanged.
UPDATE t_toast_default SET c_text = c_text || 'x' WHERE id = 1;
UPDATE t_toast_full SET c_text = c_text || 'x' WHERE id = 1;
DELETE FROM t_toast_default WHERE id = 1;
DELETE FROM t_toast_full WHERE id = 1;
