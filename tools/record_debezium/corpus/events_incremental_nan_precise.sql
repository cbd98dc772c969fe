-- A numeric primary key holding NaN and the infinities under the default
-- decimal.handling.mode (precise), streamed and then read by an incremental snapshot
-- (issue 21). events_incremental reads such keys in string mode, as the connector's own
-- test does; in precise mode the special values have no VariableScaleDecimal.
-- 3.6.3 reads none of the rows (a WARN, the window left open): the recorder waits for
-- the 4 read events in vain (300 s) and notes the timeout as a problem; that is the point.
--
-- @modes: incremental-precise
-- @extensions: plpgsql
-- @wait-reads: 4

SET client_min_messages = warning;

CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL,
                              data varchar(2048) NULL);
CREATE TABLE nan_key (id numeric PRIMARY KEY, v int);
INSERT INTO nan_key VALUES (1.5, 1), ('Infinity', 2), ('-Infinity', 3), ('NaN', 4);

-- @changes

INSERT INTO debezium_signal VALUES ('ad-hoc-nan', 'execute-snapshot', '{"data-collections": ["public.nan_key"]}');
