-- Crash corpus (found by the differential referee): under
-- time.precision.mode=nanoseconds, a NOT NULL timestamp column missing from the old key
-- of a key_change (REPLICA IDENTITY DEFAULT: the old key holds the primary key only). The
-- control mode (default) records the same changes. Row 2 is a control row.
--
-- @modes: default nanos-string-map-istring-base64

CREATE TABLE t_nn_ts (id int PRIMARY KEY, ts timestamp NOT NULL, tsz timestamptz NOT NULL, d date NOT NULL);

-- @changes
INSERT INTO t_nn_ts VALUES (1, '2000-01-01 00:00:00', '2000-01-01 00:00:00+00', '2000-01-01');
INSERT INTO t_nn_ts VALUES (2, '1999-01-01 00:00:00', '1999-01-01 00:00:00+00', '1999-01-01');
UPDATE t_nn_ts SET id = 3 WHERE id = 1;
