-- Crash corpus: numeric NaN in a numeric column without typmod (Debezium maps it to
-- io.debezium.data.VariableScaleDecimal in precise mode). Reported to make the
-- connector fail in decimal.handling.mode=precise; recorded in every decimal mode.
-- A control row follows the special value to show whether streaming continued.
--
-- @modes: default amicros-double-map-istring-base64-ph-colsrc nanos-string-map-istring-base64

CREATE TABLE t_nan (id int PRIMARY KEY, c_num numeric);

-- @changes

INSERT INTO t_nan VALUES (1, 'NaN');
INSERT INTO t_nan VALUES (2, 1.5);
