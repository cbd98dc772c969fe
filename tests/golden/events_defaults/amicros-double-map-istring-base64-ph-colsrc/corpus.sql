-- Column defaults (issue 11, class 2): every kind of default expression on every
-- type family, as the connector's default-value converter reads them into schema
-- defaults, and what those defaults do to payloads: JsonConverter's
-- replace.null.with.default (row 2 of each table is all NULL; mode
-- default-keepnulls shows the NULLs) and the zero values the connector fills for
-- NOT NULL columns missing from a delete's before-image (t_dnn, REPLICA IDENTITY
-- DEFAULT).
--
-- @modes: default default-keepnulls amicros-double-map-istring-base64-ph-colsrc
-- @modes: connect-string-b64url-hexph-unknown isostring-map-istring-hex-money0-typesrc
-- @modes: nanos-string-map-istring-base64

SET client_min_messages = warning;

CREATE SCHEMA s1;
CREATE SCHEMA s2;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'it''s');
CREATE TYPE "bug.status" AS ENUM ('open', 'closed');
CREATE TYPE s1.color AS ENUM ('red', 'blue');
CREATE DOMAIN short_text AS text;
CREATE DOMAIN d_int AS int;
CREATE DOMAIN d_int_def AS int DEFAULT 5;
CREATE DOMAIN s1.d_int AS int;
CREATE DOMAIN s2.d_int AS int;
CREATE DOMAIN s1.d_only AS int;
CREATE SEQUENCE seq_explicit;

CREATE TABLE t_dnum (
    id       int PRIMARY KEY,
    i_lit    int DEFAULT 42,
    i_neg    int DEFAULT -7,
    i_arith  int DEFAULT (1 + 2),
    i_func   int DEFAULT abs(-3),
    i_seq    int DEFAULT nextval('seq_explicit'),
    i_next   bigint DEFAULT nextval('seq_explicit'),
    i2       smallint DEFAULT 5,
    i8       bigint DEFAULT 9223372036854775807,
    i8_neg   bigint DEFAULT -1,
    n_lit    numeric(8,3) DEFAULT 1.5,
    n_nomod  numeric DEFAULT 2.50,
    n_neg    numeric(6,2) DEFAULT -0.5,
    f4       real DEFAULT 1.25,
    f8       float8 DEFAULT 2.5,
    f8_func  float8 DEFAULT random(),
    b_t      boolean DEFAULT true,
    b_f      boolean DEFAULT false,
    b_expr   boolean DEFAULT (1 = 1),
    bit1     bit(1) DEFAULT B'1',
    bit4     bit(4) DEFAULT B'1010',
    vb       varbit DEFAULT B'101',
    m        money DEFAULT 1.5,
    o        oid DEFAULT 7
);

CREATE TABLE t_dtext (
    id       int PRIMARY KEY,
    t_lit    text DEFAULT 'dflt',
    t_func   text DEFAULT lower('ABC'),
    t_concat text DEFAULT 'a' || 'b',
    t_quote  text DEFAULT 'it''s',
    t_space  text DEFAULT '  x  ',
    t_empty  text DEFAULT '',
    vc       varchar(10) DEFAULT 'v',
    bpc      char(3) DEFAULT 'c',
    js       json DEFAULT '{"a": 1}',
    jb       jsonb DEFAULT '{}',
    x        xml DEFAULT '<a/>',
    u        uuid DEFAULT '76019d1a-ad2e-4b22-96e9-1a6d6543c818',
    u_func   uuid DEFAULT gen_random_uuid(),
    by       bytea DEFAULT '\x0102',
    ia       int[] DEFAULT '{1,2}',
    ta       text[] DEFAULT '{}',
    tsv      tsvector DEFAULT 'a b',
    hs       hstore DEFAULT 'a=>1',
    ci       citext DEFAULT 'Ci',
    lt       ltree DEFAULT 'a.b',
    mac      macaddr DEFAULT '08:00:2b:01:02:03',
    mac8     macaddr8 DEFAULT '08:00:2b:01:02:03:04:05',
    cidr_c   cidr DEFAULT '10.0.0.0/8',
    inet_c   inet DEFAULT '10.0.0.1',
    nm       name DEFAULT 'nm',
    ch       "char" DEFAULT 'x',
    r4       int4range DEFAULT '[1,2)',
    rts      tsrange DEFAULT '[2000-01-01,2000-01-02)',
    pt       point DEFAULT '(1,2)'
);

CREATE TABLE t_dtime (
    id        int PRIMARY KEY,
    d_lit     date DEFAULT '2000-01-01',
    d_cur     date DEFAULT CURRENT_DATE,
    d_func    date DEFAULT now()::date,
    ts_lit    timestamp DEFAULT '2000-01-01 12:00:00.25',
    ts_now    timestamp DEFAULT now(),
    ts_local  timestamp DEFAULT LOCALTIMESTAMP,
    ts_cur    timestamp DEFAULT CURRENT_TIMESTAMP,
    ts3_lit   timestamp(3) DEFAULT '2000-01-01 12:00:00.123456',
    tz_lit    timestamptz DEFAULT '2000-01-01 12:00:00+02',
    tz_now    timestamptz DEFAULT now(),
    tz_cur    timestamptz DEFAULT CURRENT_TIMESTAMP,
    tz0_lit   timestamptz(0) DEFAULT '2000-01-01 12:00:00.5+00',
    tz0_frac  timestamptz(0) DEFAULT '2000-01-01 12:00:00.25+00'::timestamptz,
    tm_lit    time DEFAULT '12:34:56',
    tm_cur    time DEFAULT CURRENT_TIME,
    tm_local  time DEFAULT LOCALTIME,
    ttz_lit   timetz DEFAULT '12:00:00+02',
    iv_lit    interval DEFAULT '1 day 02:00:00',
    iv_func   interval DEFAULT make_interval(days => 1)
);

CREATE TABLE t_dudt (
    id        int PRIMARY KEY,
    e_lit     mood DEFAULT 'ok',
    e_quote   mood DEFAULT 'it''s',
    e_dotted  "bug.status" DEFAULT 'open',
    e_schema  s1.color DEFAULT 'red',
    dom_text  short_text DEFAULT 'plain',
    dom_cast  short_text DEFAULT ('dd'::text)::short_text,
    dom_int   d_int DEFAULT 3,
    dom_tdef  d_int_def,
    dom_s1    s1.d_int DEFAULT 4,
    dom_s2    s2.d_int DEFAULT 6,
    dom_only  s1.d_only DEFAULT 8
);

-- NOT NULL columns with and without defaults, REPLICA IDENTITY DEFAULT: a
-- delete's before-image holds only the key, the rest is the connector's fill.
CREATE TABLE t_dnn (
    id        int PRIMARY KEY,
    n_int     int NOT NULL,
    n_int_d   int NOT NULL DEFAULT 11,
    n_text    text NOT NULL,
    n_text_d  text NOT NULL DEFAULT 'tx',
    n_date_c  date NOT NULL DEFAULT CURRENT_DATE,
    n_ts_now  timestamp NOT NULL DEFAULT now(),
    n_tz_now  timestamptz NOT NULL DEFAULT now(),
    n_r4      int4range NOT NULL DEFAULT '[1,2)',
    n_tsv     tsvector NOT NULL DEFAULT 'a b',
    n_hs      hstore NOT NULL DEFAULT 'a=>1',
    n_ci      citext NOT NULL DEFAULT 'Ci',
    n_money   money NOT NULL DEFAULT 1.5,
    n_lt      ltree NOT NULL DEFAULT 'a.b',
    n_mac     macaddr NOT NULL DEFAULT '08:00:2b:01:02:03',
    n_cidr    cidr NOT NULL DEFAULT '10.0.0.0/8',
    n_oid     oid NOT NULL DEFAULT 7,
    n_name    name NOT NULL DEFAULT 'nm',
    n_char    "char" NOT NULL DEFAULT 'x',
    n_enum    mood NOT NULL DEFAULT 'ok',
    n_equote  mood NOT NULL DEFAULT 'it''s',
    n_dom     s1.d_int NOT NULL DEFAULT 4,
    n_bool_e  boolean NOT NULL DEFAULT (1 = 1),
    n_num     numeric(6,2) NOT NULL DEFAULT 1.5,
    n_uuid    uuid NOT NULL DEFAULT gen_random_uuid(),
    n_iv      interval NOT NULL DEFAULT '1 day',
    n_serial  serial,
    n_bigser  bigserial
);

-- @changes

INSERT INTO t_dnum (id) VALUES (1);
INSERT INTO t_dnum SELECT (jsonb_populate_record(NULL::t_dnum, '{"id": 2}')).*;
INSERT INTO t_dtext (id) VALUES (1);
INSERT INTO t_dtext SELECT (jsonb_populate_record(NULL::t_dtext, '{"id": 2}')).*;
INSERT INTO t_dtime (id) VALUES (1);
INSERT INTO t_dtime SELECT (jsonb_populate_record(NULL::t_dtime, '{"id": 2}')).*;
INSERT INTO t_dudt (id) VALUES (1);
INSERT INTO t_dudt SELECT (jsonb_populate_record(NULL::t_dudt, '{"id": 2}')).*;
INSERT INTO t_dnn (id, n_int, n_text) VALUES (1, 5, 'five');
UPDATE t_dnn SET n_int = 6 WHERE id = 1;
DELETE FROM t_dnn WHERE id = 1;
