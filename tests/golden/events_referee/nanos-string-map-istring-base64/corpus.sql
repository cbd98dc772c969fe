-- Classes the differential referee (tools/referee) found on generated cases, recorded
-- from the real connector: the zero values of NOT NULL uuid and timestamptz columns
-- missing from a before-image (REPLICA IDENTITY DEFAULT deletes, and the delete half of
-- a key change under REPLICA IDENTITY USING INDEX on a table with a primary key); enum
-- defaults whose type name is quoted, with and without a dot; float4 values that
-- Java 17 prints with more digits than the shortest; timetz arrays with fractions;
-- arrays of bit strings; arrays of tsvector.
--
-- @modes: default connect-string-b64url-hexph-unknown isostring-map-istring-hex-money0-typesrc
-- @modes: nanos-string-map-istring-base64

SET client_min_messages = warning;

CREATE TYPE "Mixed Enum" AS ENUM ('A', 'b c');
CREATE TYPE "bug.status" AS ENUM ('open', 'closed');
CREATE SCHEMA rs;
CREATE TYPE rs."Q E" AS ENUM ('x', 'y');

CREATE TABLE rf_zero (
    id     int PRIMARY KEY,
    u      uuid NOT NULL,
    tz     timestamptz NOT NULL,
    tz3    timestamptz(3) NOT NULL,
    tz0    timestamptz(0) NOT NULL,
    ttz    timetz NOT NULL,
    e_mix  "Mixed Enum" NOT NULL DEFAULT 'A',
    e_dot  "bug.status" NOT NULL DEFAULT 'open',
    e_sch  rs."Q E" DEFAULT 'y',
    e_mixn "Mixed Enum" DEFAULT 'b c'
);

CREATE TABLE rf_ukey (
    u    uuid PRIMARY KEY,
    k    int NOT NULL,
    note text
);
CREATE UNIQUE INDEX rf_ukey_k ON rf_ukey (k);
ALTER TABLE rf_ukey REPLICA IDENTITY USING INDEX rf_ukey_k;

CREATE TABLE rf_float (
    id  int PRIMARY KEY,
    f4  real,
    f4a real[]
);

CREATE TABLE rf_timetz (
    id   int PRIMARY KEY,
    tza  timetz[]
);

CREATE TABLE rf_bitarr (
    id   int PRIMARY KEY,
    b8a  bit(8)[],
    b1a  bit(1)[],
    vba  varbit[],
    b8d  bit(8)[] DEFAULT '{}'
);

CREATE TABLE rf_tsvarr (
    id   int PRIMARY KEY,
    tva  tsvector[],
    tvn  tsvector[] NOT NULL DEFAULT '{}'
);

-- @changes
INSERT INTO rf_zero VALUES (1, '76019d1a-ad2e-4b22-96e9-1a6d6543c818', '2000-01-01 00:00:00.5+00',
    '2000-01-01 00:00:00.25+00', '2000-01-01 00:00:01+00', '12:00:00.5+02', 'b c', 'closed', 'x', NULL);
INSERT INTO rf_zero (id, u, tz, tz3, tz0, ttz) VALUES (2, '00000000-0000-0000-0000-000000000001',
    '1999-12-31 23:59:59-08', '2020-02-29 12:00:00+05:30', '2000-01-01 00:00:00+00', '00:00:00+00');
DELETE FROM rf_zero WHERE id = 1;

INSERT INTO rf_ukey VALUES ('00000000-0000-0000-0000-000000000001', 1, 'a');
INSERT INTO rf_ukey VALUES ('00000000-0000-0000-0000-000000000002', 2, 'b');
UPDATE rf_ukey SET k = 1002 WHERE k = 2;
DELETE FROM rf_ukey WHERE k = 1;

INSERT INTO rf_float VALUES (1, 1.17549435e-38, ARRAY[1.17549435e-38, 0.1]::real[]);
INSERT INTO rf_float VALUES (2, 3.4028235e38, '{}');

INSERT INTO rf_timetz VALUES (1, ARRAY['23:59:59.5-05:30', '12:00:00.123456+02']::timetz[]);
INSERT INTO rf_timetz VALUES (2, ARRAY['12:00:00+02']::timetz[]);

INSERT INTO rf_bitarr VALUES (1, ARRAY[B'10100101', B'00000000']::bit(8)[], ARRAY[B'1']::bit(1)[],
    ARRAY[B'101', B'']::varbit[], '{}');
INSERT INTO rf_bitarr (id) VALUES (2);
UPDATE rf_bitarr SET b8a = '{}' WHERE id = 2;

INSERT INTO rf_tsvarr VALUES (1, ARRAY['a fat cat', 'x:1A y:2B']::tsvector[], ARRAY['q']::tsvector[]);
INSERT INTO rf_tsvarr VALUES (2, ARRAY['a', NULL]::tsvector[], '{}');
INSERT INTO rf_tsvarr (id) VALUES (3);
DELETE FROM rf_tsvarr WHERE id = 1;
