-- Types corpus: one column per PostgreSQL type the project maps, with edge values.
-- (Large TOASTed values are in types_toast.sql.)
--
-- Recorded by tools/record_debezium/record.py. Everything before the "@changes"
-- marker is setup (DDL, run before the slots exist); everything after it runs
-- LIVE while Debezium streams, one top-level statement per transaction (psql
-- autocommit) unless written inside an explicit BEGIN/COMMIT.
-- Extensions postgis, hstore, ltree and citext are created by the recorder.
--
-- @modes: default amicros-double-map-istring-base64-ph-colsrc connect-string-b64url-hexph-unknown
-- @modes: isostring-map-istring-hex-money0-typesrc micros-money4-unknown nanos-string-map-istring-base64
-- @modes: default-keepnulls

SET client_min_messages = warning;

CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'with space', 'quo"te');
CREATE DOMAIN d_varchar AS varchar(20);
CREATE DOMAIN d_numeric AS numeric(10,2);
CREATE DOMAIN d_int AS int;
CREATE TYPE complex AS (r float8, i float8);

-- Scalars that are neither numeric nor temporal. REPLICA IDENTITY FULL so the
-- update and delete carry complete before images.
CREATE TABLE t_scalar (
    id        int PRIMARY KEY,
    c_bool    boolean,
    c_bit1    bit(1),
    c_bit8    bit(8),
    c_varbit  varbit,
    c_varbit1 varbit(1),
    c_int2    int2,
    c_int4    int4,
    c_int8    int8,
    c_oid     oid,
    c_float4  float4,
    c_float8  float8,
    c_char    char(5),
    c_varchar varchar(10),
    c_text    text,
    c_citext  citext,
    c_name    name,
    c_bytea   bytea,
    c_json    json,
    c_jsonb   jsonb,
    c_xml     xml,
    c_uuid    uuid,
    c_ltree   ltree,
    c_inet    inet,
    c_cidr    cidr,
    c_macaddr macaddr,
    c_macaddr8 macaddr8,
    c_enum    mood,
    c_dvarchar d_varchar,
    c_dint    d_int,
    c_tsvector tsvector,
    c_complex complex
);
ALTER TABLE t_scalar REPLICA IDENTITY FULL;

-- Exact numerics and money. REPLICA IDENTITY DEFAULT: deletes carry only the key.
CREATE TABLE t_numeric (
    id          int PRIMARY KEY,
    c_num_10_2  numeric(10,2),
    c_num_5     numeric(5),
    c_num       numeric,
    c_num_5_m2  numeric(5,-2),
    c_num_38_10 numeric(38,10),
    c_dnumeric  d_numeric,
    c_money     money
);

-- Temporal types. REPLICA IDENTITY FULL.
CREATE TABLE t_time (
    id        int PRIMARY KEY,
    c_date    date,
    c_time0   time(0),
    c_time1   time(1),
    c_time3   time(3),
    c_time6   time(6),
    c_time    time,
    c_timetz  timetz,
    c_timetz3 timetz(3),
    c_ts0     timestamp(0),
    c_ts3     timestamp(3),
    c_ts6     timestamp(6),
    c_ts      timestamp,
    c_tstz0   timestamptz(0),
    c_tstz3   timestamptz(3),
    c_tstz    timestamptz,
    c_interval interval,
    c_interval3 interval(3),
    c_interval_ym interval year to month
);
ALTER TABLE t_time REPLICA IDENTITY FULL;

-- Geometric, PostGIS, hstore and range types.
CREATE TABLE t_geo (
    id          int PRIMARY KEY,
    c_point     point,
    c_geom      geometry,
    c_geom_4326 geometry(Point, 4326),
    c_geog      geography,
    c_box       box,
    c_circle    circle,
    c_line      line,
    c_lseg      lseg,
    c_path      path,
    c_polygon   polygon
);
ALTER TABLE t_geo REPLICA IDENTITY FULL;

CREATE TABLE t_hstore_range (
    id          int PRIMARY KEY,
    c_hstore    hstore,
    c_int4range int4range,
    c_int8range int8range,
    c_numrange  numrange,
    c_tsrange   tsrange,
    c_tstzrange tstzrange,
    c_daterange daterange
);
ALTER TABLE t_hstore_range REPLICA IDENTITY FULL;

-- One-dimensional arrays (plus one 2-D and one non-default lower bound).
CREATE TABLE t_array (
    id            int PRIMARY KEY,
    a_int2        int2[],
    a_int4        int4[],
    a_int8        int8[],
    a_float4      float4[],
    a_float8      float8[],
    a_numeric     numeric[],
    a_num_10_2    numeric(10,2)[],
    a_bool        bool[],
    a_text        text[],
    a_varchar     varchar(10)[],
    a_char        char(3)[],
    a_citext      citext[],
    a_bytea       bytea[],
    a_date        date[],
    a_time        time[],
    a_timetz      timetz[],
    a_ts          timestamp[],
    a_tstz        timestamptz[],
    a_interval    interval[],
    a_uuid        uuid[],
    a_json        json[],
    a_jsonb       jsonb[],
    a_inet        inet[],
    a_cidr        cidr[],
    a_macaddr     macaddr[],
    a_money       money[],
    a_name        name[],
    a_xml         xml[],
    a_point       point[],
    a_ltree       ltree[],
    a_hstore      hstore[],
    a_geom        geometry[],
    a_enum        mood[],
    a_int4range   int4range[],
    a_numrange    numrange[],
    a_tstzrange   tstzrange[],
    a_daterange   daterange[],
    a_varbit      varbit[],
    a_int4_2d     int4[][],
    a_int4_lb     int4[]
);
ALTER TABLE t_array REPLICA IDENTITY FULL;

-- Column defaults (JsonConverter's replace.null.with.default substitutes schema
-- defaults for nulls unless disabled; the explicit-NULL row shows what happens).
CREATE TABLE t_defaults (
    id        int PRIMARY KEY,
    d_int     int DEFAULT 42,
    d_text    text DEFAULT 'dflt',
    d_bool    boolean DEFAULT true,
    d_num     numeric(6,2) DEFAULT 1.50,
    d_ts      timestamp DEFAULT '2000-01-01 00:00:00',
    d_date    date DEFAULT '2000-01-01',
    d_enum    mood DEFAULT 'ok'
);

-- @changes

-- ---------------------------------------------------------------- t_scalar
INSERT INTO t_scalar VALUES (
    1, true, B'1', B'10101010', B'1010101010101', B'1', 32767, 2147483647, 9223372036854775807,
    4294967295, 3.4028235e38, 1.7976931348623157e308, 'ab', 'varchar', 'héllo ✓ 日本',
    'MiXeD Case', 'a_name', '\x00ff10deadbeef',
    '{"a": 1,  "b": [1, 2.50, "x"], "c": null}', '{"b": 1, "a": [true, null, 1.50]}',
    '<a x="1">text &amp; more</a>', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'Top.Science.Astronomy',
    '192.168.1.5/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05',
    'happy', 'domain text', 7, 'a fat cat sat', ROW(1.5, -2)::complex);
INSERT INTO t_scalar VALUES (
    2, false, B'0', B'00000000', B'', B'0', -32768, -2147483648, -9223372036854775808,
    0, 'NaN', 'NaN', '', '', '', '', '', '\x',
    '[]', '{}', '<empty/>', '00000000-0000-0000-0000-000000000000', '',
    '::1', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00:00:00',
    'with space', '', -1, '', ROW(NULL, NULL)::complex);
INSERT INTO t_scalar VALUES (
    3, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 1, 'Infinity', '-Infinity', 'abcde', 'quo"te\', E'line1\nline2\ttab',
    'ÄÖÜ', 'n', '\x00',
    '"just a string"', '"ünï"', 'bare text', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'a',
    '10.0.0.1', '192.168.0.0/16', '01:02:03:04:05:06', '01:02:03:04:05:06:07:08',
    'quo"te', 'x', 0, '''quoted'' lex:1A', ROW(0, 0)::complex);
INSERT INTO t_scalar VALUES (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '-Infinity', 'Infinity',
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL);
INSERT INTO t_scalar VALUES (5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '-0', 1.17549435e-38,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL);
UPDATE t_scalar SET c_float8 = 4.9e-324, c_float4 = 1.4e-45 WHERE id = 5;
INSERT INTO t_scalar (id) VALUES (99);
UPDATE t_scalar SET c_text = 'updated ✓', c_int4 = 1 WHERE id = 1;
DELETE FROM t_scalar WHERE id = 2;

-- ---------------------------------------------------------------- t_numeric
INSERT INTO t_numeric VALUES (1, 12345678.90, 12345, 1.500, 12345, 1234567890123456789012345678.0123456789, 1.5, 12.34);
INSERT INTO t_numeric VALUES (2, -0.01, -99999, -123.456, -99949, -0.0000000001, -99999999.99, -12.34);
INSERT INTO t_numeric VALUES (3, 0, 0, 0.000, 0, 0, 0, 0);
INSERT INTO t_numeric VALUES (4, 1.5, 1, ('0.' || repeat('1234567890', 100))::numeric, 50, 1, 0.5, '92233720368547758.07');
INSERT INTO t_numeric VALUES (5, NULL, NULL, repeat('9', 1000)::numeric, NULL, NULL, NULL, '-92233720368547758.08');
INSERT INTO t_numeric VALUES (6, NULL, NULL, ('0.' || repeat('0', 129) || '1')::numeric, NULL, NULL, NULL, 1000000.5);
INSERT INTO t_numeric VALUES (7, NULL, NULL, '1e130'::numeric, NULL, NULL, NULL, 0.01);
INSERT INTO t_numeric VALUES (8, NULL, NULL, '-1.0e-20'::numeric, NULL, NULL, NULL, NULL);
INSERT INTO t_numeric VALUES (9, NULL, NULL, 100, NULL, NULL, NULL, NULL);
INSERT INTO t_numeric (id) VALUES (99);
UPDATE t_numeric SET c_num = 2.50, c_money = 99.99 WHERE id = 1;
DELETE FROM t_numeric WHERE id = 3;

-- ---------------------------------------------------------------- t_time
INSERT INTO t_time VALUES (1, '2024-02-29', '13:14:15', '13:14:15.1', '13:14:15.123', '13:14:15.123456',
    '13:14:15.123456', '13:14:15.123456+05:45', '13:14:15.123+05:45',
    '2024-02-29 13:14:15', '2024-02-29 13:14:15.123', '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.123456',
    '2024-02-29 13:14:15+02', '2024-02-29 13:14:15.123-03:30', '2024-02-29 13:14:15.123456+00',
    '1 year 2 mons 3 days 04:05:06.789', '1 year 2 mons 3 days 04:05:06.789', '1 year 2 mons');
INSERT INTO t_time VALUES (2, 'infinity', '00:00:00', '00:00:00', '00:00:00', '00:00:00', '00:00:00',
    '00:00:00-00:30', '00:00:00+00', 'infinity', 'infinity', 'infinity', 'infinity',
    'infinity', 'infinity', 'infinity',
    '-1 year -2 mons +3 days -04:05:06.5', '-1 days +00:00:00.0001', '-11 mons');
INSERT INTO t_time VALUES (3, '-infinity', '24:00:00', '24:00:00', '24:00:00', '24:00:00', '24:00:00',
    '24:00:00+05', '23:59:59.999-14', '-infinity', '-infinity', '-infinity', '-infinity',
    '-infinity', '-infinity', '-infinity',
    '00:00:00.000001', '178000000 years', '-178000000 years');
INSERT INTO t_time VALUES (4, '0044-03-15 BC', '23:59:59', '23:59:59.9', '23:59:59.999', '23:59:59.999999',
    '23:59:59.999999', '23:59:59.999999+14', '12:00:00-12',
    '0044-03-15 12:00:00 BC', '0001-01-01 00:00:00.001 BC', '4713-01-01 00:00:00 BC', '0001-01-01 00:00:00',
    '0044-03-15 12:00:00+00 BC', '0001-12-31 23:59:59.999+00 BC', '1969-12-31 23:59:59.999999+00',
    '1 day -1 second', '30 days', '0 mons');
INSERT INTO t_time VALUES (5, '12345-01-01', '00:00:01', '00:00:00.5', '00:00:00.001', '00:00:00.000001',
    '12:00:00', '12:00:00+00', '12:00:00.5+01',
    '12345-06-07 08:09:10', '10000-01-01 00:00:00.001', '294276-12-31 23:59:59.999999', '9999-12-31 23:59:59.999999',
    '12345-06-07 08:09:10+00', '10000-01-01 00:00:00.001+00', '294276-12-31 23:59:59.999999+00',
    '-178000000 years', '0', '178000000 years');
INSERT INTO t_time VALUES (6, '1970-01-01', NULL, NULL, NULL, NULL, '00:00:00.000001', NULL, NULL,
    '1970-01-01 00:00:00', '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.999999', '1900-01-01 00:00:00',
    '1970-01-01 00:00:00+00', '1969-12-31 23:59:59.999+00', '2038-01-19 03:14:08+00',
    '2 hours 30 minutes', '3 days 4.5 seconds', NULL);
INSERT INTO t_time VALUES (7, '0001-01-01', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, '1582-10-04 12:00:00', NULL, NULL, '1582-10-15 00:00:00+00', '1 mon', NULL, '1 year');
INSERT INTO t_time (id) VALUES (99);
UPDATE t_time SET c_ts = '2000-01-01 00:00:00', c_interval = '-00:00:00.000001' WHERE id = 1;
DELETE FROM t_time WHERE id = 2;

-- ---------------------------------------------------------------- t_geo
INSERT INTO t_geo VALUES (1, '(1.5,-2.25)', 'POINT(1 2)', 'SRID=4326;POINT(-71.06 42.36)', 'POINT(-71.06 42.36)',
    '((0,0),(1,1))', '<(0,0),1>', '{1,-1,0}', '[(0,0),(1,1)]', '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(1,0))');
INSERT INTO t_geo VALUES (2, '(0,0)', 'SRID=4326;POINT(1 2)', NULL, 'SRID=4326;LINESTRING(0 0,1 1)',
    '((3,4),(1,2))', '<(1.5,2.5),0.5>', '{0,1,-3}', '[(1,2),(3,4)]', '((0,0),(1,1),(2,0))', '((0,0),(0,1),(1,1),(1,0))');
INSERT INTO t_geo VALUES (3, '(1e300,-1e-300)', 'LINESTRING(0 0,1 1,2 1)', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO t_geo VALUES (4, 'NaN,Infinity', 'SRID=3857;POLYGON((0 0,4 0,4 4,0 4,0 0))', NULL,
    'POLYGON((0 0,1 0,1 1,0 1,0 0))', NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO t_geo VALUES (5, NULL, 'POINT Z (1 2 3)', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO t_geo VALUES (6, NULL, 'GEOMETRYCOLLECTION EMPTY', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO t_geo (id) VALUES (99);
UPDATE t_geo SET c_geom = 'POINT(5 6)' WHERE id = 1;
DELETE FROM t_geo WHERE id = 2;

-- ---------------------------------------------------------------- t_hstore_range
INSERT INTO t_hstore_range VALUES (1, '"a"=>"1", "b"=>NULL',
    '[1,10)', '[-9223372036854775808,9223372036854775807)', '[1.5,2.50]',
    '[2024-01-01 00:00,2024-01-02 00:00:00.123456)', '[2024-01-01 00:00+00,2024-01-02 00:00+05:30)',
    '[2024-01-01,2024-02-01)');
INSERT INTO t_hstore_range VALUES (2, '"quo\"te"=>"back\\slash", "com,ma"=>"x=>y", "sp ace"=>"", "=>"=>"NULL"',
    'empty', 'empty', 'empty', 'empty', 'empty', 'empty');
INSERT INTO t_hstore_range VALUES (3, '"ключ"=>"✓ 日本", "é"=>"ü"',
    '(,5]', '(0,)', '(,)', '(,infinity]', '[-infinity,2024-01-01 00:00+00]', '(2024-01-01,)');
INSERT INTO t_hstore_range VALUES (4, '',
    '(1,2]', '[5,6]', '(-1e-10,1e10]', '(0044-03-15 00:00:00 BC,2024-01-01 00:00]', '(,)', '[0044-03-15 BC,infinity)');
INSERT INTO t_hstore_range VALUES (5, '"k"=>"v"', '[3,4)', NULL, '[NaN,NaN]', NULL, NULL, '[2024-01-01,2024-01-01]');
INSERT INTO t_hstore_range (id) VALUES (99);
UPDATE t_hstore_range SET c_hstore = c_hstore || '"new"=>"val"' WHERE id = 1;
DELETE FROM t_hstore_range WHERE id = 2;

-- ---------------------------------------------------------------- t_array
INSERT INTO t_array VALUES (1,
    '{1,-2,32767}', '{1,2,3}', '{9223372036854775807,-9223372036854775808}', '{1.5,NaN,Infinity,-Infinity}',
    '{0.1,1e300,-Infinity,NaN}', '{1.50,-2,1e-20}', '{1.5,2.25}', '{true,false}',
    '{plain,"a,b","{c}","\"q\"","back\\slash","with space","NULL","",héllo ✓}',
    '{a,"b c"}', '{a,bc,"d e"}', '{MiXeD,"ÄÖÜ"}', '{"\\x00ff","\\x"}',
    '{2024-02-29,"0044-03-15 BC",infinity,-infinity,12345-01-01}', '{13:14:15.123456,24:00:00}',
    '{13:14:15+05:45,00:00:00-00:30}', '{"2024-02-29 13:14:15.123456",infinity,"0044-03-15 12:00:00 BC"}',
    '{"2024-02-29 13:14:15.123456+02",-infinity}', '{"1 year 2 mons 3 days 04:05:06.789","-00:00:01"}',
    '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', ARRAY['{"a": 1}'::json, '[1, 2]'::json], ARRAY['{"b": 1, "a": 2}'::jsonb, 'null'::jsonb],
    '{192.168.1.5/24,::1}', '{10.0.0.0/8}', '{08:00:2b:01:02:03}', '{12.34,-0.01}', '{a_name,"b name"}',
    ARRAY['<a>1</a>'::xml, '<b/>'::xml], '{"(1,2)","(3.5,-4)"}', '{Top.Science,a.b.c}',
    ARRAY['"a"=>"1", "b"=>NULL'::hstore, ''::hstore], ARRAY['POINT(1 2)'::geometry, 'SRID=4326;POINT(3 4)'::geometry],
    '{happy,sad,"with space","quo\"te"}', '{"[1,10)",empty,"(,5]"}', '{"[1.5,2.5]"}',
    '{"[2024-01-01 00:00+00,2024-01-02 00:00+00)"}', '{"[2024-01-01,2024-02-01)"}', '{101,"",1}',
    '{{1,2},{3,4}}', '[0:1]={1,2}');
INSERT INTO t_array VALUES (2,
    '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
    '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
    '{}', '{}', '{}', '{}', '{}', '[-5:-3]={7,8,9}');
INSERT INTO t_array VALUES (3,
    '{1,NULL,3}', '{NULL,2}', '{1,NULL}', '{NULL,1.5}', '{1.5,NULL}', '{NULL,1.5}', '{NULL,1.5}', '{true,NULL}',
    '{a,NULL,"NULL"}', '{NULL,b}', '{NULL,c}', '{NULL,d}', '{NULL,"\\x01"}', '{2024-01-01,NULL}',
    '{NULL,12:00:00}', '{NULL,12:00:00+01}', '{NULL,"2024-01-01 00:00:00"}', '{NULL,"2024-01-01 00:00:00+00"}',
    '{NULL,"1 day"}', '{NULL,a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', ARRAY[NULL, '1'::json],
    ARRAY[NULL, '1'::jsonb], '{NULL,10.0.0.1}', '{NULL,10.0.0.0/8}', '{NULL,08:00:2b:01:02:03}',
    '{NULL,1.00}', '{NULL,n}', ARRAY[NULL, '<x/>'::xml], '{NULL,"(0,0)"}', '{NULL,a.b}',
    ARRAY[NULL, '"k"=>"v"'::hstore], ARRAY[NULL, 'POINT(0 0)'::geometry], '{happy,NULL}',
    '{NULL,"[1,2)"}', '{NULL,"[1,2)"}', '{NULL,"[2024-01-01 00:00+00,)"}', '{NULL,"[2024-01-01,)"}', '{NULL,1}',
    '{{1,NULL},{NULL,4}}', '{NULL}');
INSERT INTO t_array VALUES (4,
    '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}',
    '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}',
    '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}',
    '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{NULL}', '{{NULL,NULL}}', '{NULL,NULL}');
INSERT INTO t_array (id, a_numeric) VALUES (5, '{1.5,NaN}');
INSERT INTO t_array (id) VALUES (99);
UPDATE t_array SET a_int4 = '{4,5,6}', a_text = '{x}' WHERE id = 1;
DELETE FROM t_array WHERE id = 4;

-- ---------------------------------------------------------------- t_defaults
INSERT INTO t_defaults (id) VALUES (1);
INSERT INTO t_defaults VALUES (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO t_defaults VALUES (3, 7, 'seven', false, 7.77, '2007-07-07 07:07:07', '2007-07-07', 'sad');
UPDATE t_defaults SET d_int = NULL WHERE id = 1;

-- An explicit multi-statement transaction.
BEGIN;
INSERT INTO t_scalar (id, c_text) VALUES (100, 'in txn 1');
INSERT INTO t_numeric (id, c_num) VALUES (100, 100.100);
UPDATE t_scalar SET c_text = 'in txn 2' WHERE id = 100;
COMMIT;
