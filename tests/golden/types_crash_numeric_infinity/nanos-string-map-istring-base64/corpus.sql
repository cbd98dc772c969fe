-- Crash corpus: numeric Infinity (PostgreSQL >= 14; only in numeric without
-- typmod). Recorded in every decimal mode. A control row follows.
--
-- @modes: default amicros-double-map-istring-base64-ph-colsrc nanos-string-map-istring-base64

CREATE TABLE t_inf (id int PRIMARY KEY, c_num numeric);

-- @changes

INSERT INTO t_inf VALUES (1, 'Infinity');
INSERT INTO t_inf VALUES (2, 1.5);
