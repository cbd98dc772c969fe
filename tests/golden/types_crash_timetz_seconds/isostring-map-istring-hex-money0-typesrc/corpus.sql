-- Crash corpus: a timetz whose UTC offset has a seconds part ('+05:30:15'),
-- reported to crash the connector. Recorded under the time precision modes that
-- take different code paths. Row 2 is a control row. (The same offset inside a
-- timetz[] is types_crash_timetz_seconds_array.sql.)
--
-- @modes: default connect-string-b64url-hexph-unknown isostring-map-istring-hex-money0-typesrc

CREATE TABLE t_timetz_sec (id int PRIMARY KEY, c_timetz timetz);

-- @changes

INSERT INTO t_timetz_sec VALUES (1, '12:00:00+05:30:15');
INSERT INTO t_timetz_sec VALUES (2, '12:00:00+05:30');
