-- Interval strings whose seconds do not survive a double (issue 11, class 9),
-- in the numeric and string interval modes, and a 2-D text[] (the connector
-- prints a Java array identity for each sub-array).
--
-- @modes: default nanos-string-map-istring-base64 amicros-double-map-istring-base64-ph-colsrc

CREATE TABLE t_ivl (id int PRIMARY KEY, c_iv interval, c_text2d text[]);

-- @changes

INSERT INTO t_ivl VALUES (1, '1.003691 seconds', '{{a,b},{c,d}}');
INSERT INTO t_ivl VALUES (2, '00:00:00.1', '{{x}}');
INSERT INTO t_ivl VALUES (3, '-1.1 seconds', '{a,b}');
INSERT INTO t_ivl VALUES (4, '3 days 04:05:06.789', NULL);
INSERT INTO t_ivl VALUES (5, '0.000001 seconds', '{{NULL,"q r"}}');
INSERT INTO t_ivl VALUES (6, '1 year 2 mons 00:00:01.234567', '{}');
INSERT INTO t_ivl VALUES (7, '-00:00:00.000007', NULL);
INSERT INTO t_ivl VALUES (8, '59.999999 seconds', NULL);
INSERT INTO t_ivl VALUES (9, '123456789.123456 seconds', NULL);
