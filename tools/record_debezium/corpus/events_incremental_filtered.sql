-- Ad hoc incremental snapshots and the table filters (issue 21): the signal names a
-- captured table and one that table.include.list leaves out (and a regex matching
-- both). The connector snapshots what it captures only.
--
-- @modes: incremental-include-list
-- @extensions: plpgsql
-- @wait-reads: 2 public.inc_in

SET client_min_messages = warning;

CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL,
                              data varchar(2048) NULL);
CREATE TABLE inc_in (id int PRIMARY KEY, v text);
CREATE TABLE inc_out (id int PRIMARY KEY, v text);
INSERT INTO inc_in VALUES (1, 'in 1'), (2, 'in 2');
INSERT INTO inc_out VALUES (1, 'out 1'), (2, 'out 2');

-- @changes

INSERT INTO debezium_signal VALUES ('ad-hoc-out', 'execute-snapshot', '{"data-collections": ["public.inc_out"]}');
INSERT INTO debezium_signal VALUES ('ad-hoc-both', 'execute-snapshot', '{"data-collections": ["public.inc_.*"]}');
INSERT INTO inc_out VALUES (3, 'out 3');
INSERT INTO inc_in VALUES (3, 'in 3');
