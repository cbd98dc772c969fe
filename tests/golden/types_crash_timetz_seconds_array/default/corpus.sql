-- Crash corpus: timetz[] elements whose UTC offset has a seconds part
-- ('-00:00:30', '+05:30:15'). Row 2 is a control row.
--
-- @modes: default connect-string-b64url-hexph-unknown isostring-map-istring-hex-money0-typesrc

CREATE TABLE t_timetz_sec_array (id int PRIMARY KEY, a_timetz timetz[]);

-- @changes

INSERT INTO t_timetz_sec_array VALUES (1, '{12:00:00-00:00:30,12:00:00+05:30:15}');
INSERT INTO t_timetz_sec_array VALUES (2, '{12:00:00+05:30}');
