-- Ad hoc incremental snapshots stopped by a signal (issue 21): a snapshot of three
-- tables, and right after it, before the connector has read its first chunk back, a
-- stop-snapshot naming the second table. Both signals are committed before the
-- connector reads them, so what it does is deterministic.
--
-- @modes: incremental-stop
-- @extensions: plpgsql
-- @wait-reads: 4 public.stop_c

SET client_min_messages = warning;

CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL,
                              data varchar(2048) NULL);
CREATE TABLE stop_a (id int PRIMARY KEY, v text);
CREATE TABLE stop_b (id int PRIMARY KEY, v text);
CREATE TABLE stop_c (id int PRIMARY KEY, v text);
INSERT INTO stop_a SELECT g, 'a' || g FROM generate_series(1, 4) g;
INSERT INTO stop_b SELECT g, 'b' || g FROM generate_series(1, 4) g;
INSERT INTO stop_c SELECT g, 'c' || g FROM generate_series(1, 4) g;

-- @changes

INSERT INTO debezium_signal VALUES ('ad-hoc-abc', 'execute-snapshot', '{"data-collections": ["public.stop_a", "public.stop_b", "public.stop_c"]}');
INSERT INTO debezium_signal VALUES ('stop-b', 'stop-snapshot', '{"data-collections": ["public.stop_b"], "type": "INCREMENTAL"}');
