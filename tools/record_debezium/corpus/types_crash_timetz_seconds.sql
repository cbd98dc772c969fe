-- Crash corpus: a timetz whose UTC offset has a seconds part ('+05:30:15'),
-- reported to crash the connector. Recorded under the time precision modes that
-- take different code paths. Row 2 puts the same value inside a timetz[]; row 3
-- is a control row.
--
-- @modes: default connect-string-b64url-m4-hexph-unknown isostring-map-istring-hex-typesrc

CREATE TABLE t_timetz_sec (id int PRIMARY KEY, c_timetz timetz, a_timetz timetz[]);

-- @changes

INSERT INTO t_timetz_sec VALUES (1, '12:00:00+05:30:15', NULL);
INSERT INTO t_timetz_sec VALUES (2, NULL, '{12:00:00-00:00:30}');
INSERT INTO t_timetz_sec VALUES (3, '12:00:00+05:30', '{12:00:00+05:30}');
