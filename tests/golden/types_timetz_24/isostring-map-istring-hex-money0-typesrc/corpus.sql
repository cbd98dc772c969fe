-- timetz 24:00:00 with a zero offset (issue 11, class 9), alone in its corpus in
-- case it stops the connector. Row 2 is a control row.
--
-- @modes: default connect-string-b64url-hexph-unknown isostring-map-istring-hex-money0-typesrc

CREATE TABLE t_timetz24 (id int PRIMARY KEY, c_timetz timetz, c_timetz6 timetz(6));

-- @changes

INSERT INTO t_timetz24 VALUES (1, '24:00:00+00', '24:00:00+00');
INSERT INTO t_timetz24 VALUES (2, '23:59:59.999999+00', '24:00:00-01');
