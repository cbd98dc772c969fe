-- Crash corpus: numeric NaN in a numeric(10,2) column (Debezium maps it to
-- org.apache.kafka.connect.data.Decimal in precise mode). Recorded in every
-- decimal mode. A control row follows to show whether streaming continued.
--
-- @modes: default amicros-double-map-istring-base64-ph-colsrc nanos-string-map-istring-base64

CREATE TABLE t_nan_typmod (id int PRIMARY KEY, c_num_10_2 numeric(10,2));

-- @changes

INSERT INTO t_nan_typmod VALUES (1, 'NaN');
INSERT INTO t_nan_typmod VALUES (2, 1.5);
