-- Crash corpus (found by the differential referee): a NOT NULL bit(n)[] column. The
-- connector declares it as one bit string and converts every value to null
-- (events_referee, rf_bitarr), which a required field cannot hold. Row 1 of the
-- control table is recorded before it.
--
-- @modes: default

CREATE TABLE t_ok (id int PRIMARY KEY);
CREATE TABLE t_bitarr_nn (id int PRIMARY KEY, b8a bit(8)[] NOT NULL);

-- @changes
INSERT INTO t_ok VALUES (1);
INSERT INTO t_bitarr_nn VALUES (1, ARRAY[B'10100101']::bit(8)[]);
