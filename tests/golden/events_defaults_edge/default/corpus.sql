-- Column defaults at the edges (issue 11, class 2): special values, literals with
-- more digits than their column, NULL defaults, keywords that are neither calls
-- nor CURRENT_*, expressions around calls, casts through other types. Row 2 of
-- each table is all NULL (replace.null.with.default in the modes that keep it).
--
-- @modes: default nanos-string-map-istring-base64 isostring-map-istring-hex-money0-typesrc

SET client_min_messages = warning;

CREATE TYPE mood AS ENUM ('sad', 'ok');

CREATE TABLE t_edge_num (
    id        int PRIMARY KEY,
    n_more    numeric(6,2) DEFAULT 1.555,
    n_nan     numeric(6,2) DEFAULT 'NaN',
    n_exp     numeric(10,2) DEFAULT 1e3,
    n_neg     numeric DEFAULT -2.5,
    f8_nan    float8 DEFAULT 'NaN',
    f4_ninf   float4 DEFAULT '-Infinity',
    f8_exp    float8 DEFAULT 1.5e-7,
    i_null    int DEFAULT NULL,
    i_big     bigint DEFAULT -9223372036854775808,
    i2_neg    smallint DEFAULT -32768,
    b_null    boolean DEFAULT NULL,
    b_str     boolean DEFAULT 'yes',
    bit1_0    bit(1) DEFAULT B'0',
    vb1       varbit(1) DEFAULT B'1',
    vb_func   varbit DEFAULT B'1' || B'0',
    e_null    mood DEFAULT NULL,
    e_cast    mood DEFAULT 'ok'::text::mood
);

CREATE TABLE t_edge_text (
    id        int PRIMARY KEY,
    t_null    text DEFAULT NULL,
    t_user    text DEFAULT current_user,
    t_bslash  text DEFAULT E'a\\b',
    t_vc_cast text DEFAULT 'x'::varchar,
    vc_text   varchar(5) DEFAULT 'abc'::text,
    t_num     text DEFAULT 12,
    t_nested  text DEFAULT upper(lower('Ab')),
    t_case    text DEFAULT CASE WHEN true THEN 'y' ELSE 'n' END,
    u_upper   uuid DEFAULT 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
    js_arr    jsonb DEFAULT '[1, 2]',
    x_func    xml DEFAULT xmlelement(name a)
);

CREATE TABLE t_edge_time (
    id         int PRIMARY KEY,
    d_inf      date DEFAULT 'infinity',
    d_expr     date DEFAULT (CURRENT_DATE + 1),
    ts_ninf    timestamp DEFAULT '-infinity',
    ts_expr    timestamp DEFAULT (now() + '1 day'::interval),
    ts_at      timestamp DEFAULT (now() AT TIME ZONE 'utc'),
    tz_inf     timestamptz DEFAULT 'infinity',
    tz3_more   timestamptz(3) DEFAULT '2000-01-01 00:00:00.123456+00',
    tz_offset  timestamptz DEFAULT '2000-06-01 12:00:00+05:30',
    t3_more    time(3) DEFAULT '12:00:00.123456',
    t_local3   time(3) DEFAULT LOCALTIME(3),
    ts_local0  timestamp(0) DEFAULT LOCALTIMESTAMP(0),
    iv_ym      interval DEFAULT '1 year 2 mons',
    iv_neg     interval DEFAULT '-1 day +02:00:00',
    iv_frac    interval DEFAULT '1.003691 seconds',
    d_bc       date DEFAULT '0044-03-15 BC'
);

-- @changes

INSERT INTO t_edge_num (id) VALUES (1);
INSERT INTO t_edge_num SELECT (jsonb_populate_record(NULL::t_edge_num, '{"id": 2}')).*;
INSERT INTO t_edge_text (id) VALUES (1);
INSERT INTO t_edge_text SELECT (jsonb_populate_record(NULL::t_edge_text, '{"id": 2}')).*;
INSERT INTO t_edge_time (id) VALUES (1);
INSERT INTO t_edge_time SELECT (jsonb_populate_record(NULL::t_edge_time, '{"id": 2}')).*;
