-- The signal examples of the connector's documentation (seed 003, "Triggering an
-- incremental snapshot" and "Ad hoc incremental snapshots with additional-condition"),
-- run as written: the names are the documentation's (myschema.debezium_signal,
-- schema1.table1, schema2.table2, schema1.products with id, color, quantity), the first
-- example without its callout numbers (1 to 6), so with its data as printed: a JSON
-- object followed by ', "additional-condition":"color=blue"}'. Every example uses the id
-- 'ad-hoc-1', so each signal row is deleted before the next is inserted (a deletion is
-- no signal). What 3.6.3 does with each is what docs/snapshots.md compares pgcdc-events
-- to ("The connector documentation's examples").
--
-- @modes: seed003
-- @extensions: plpgsql
-- @wait-reads: 10

SET client_min_messages = warning;

CREATE SCHEMA myschema;
CREATE SCHEMA schema1;
CREATE SCHEMA schema2;
CREATE TABLE myschema.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL,
                                       data varchar(2048) NULL);
CREATE TABLE schema1.table1 (id int PRIMARY KEY, color text);
CREATE TABLE schema2.table2 (id int PRIMARY KEY, color text);
CREATE TABLE schema1.products (id int PRIMARY KEY, color text, quantity int);
INSERT INTO schema1.table1 VALUES (1, 'blue'), (2, 'red');
INSERT INTO schema2.table2 VALUES (1, 'red'), (2, 'blue');
INSERT INTO schema1.products VALUES (1, 'blue', 5), (2, 'red', 20), (3, 'blue', 30);

-- @changes

INSERT INTO myschema.debezium_signal (id, type, data) values ('ad-hoc-1', 'execute-snapshot', '{"data-collections": ["schema1.table1", "schema2.table2"], "type":"incremental"}, "additional-condition":"color=blue"}');
SELECT pg_sleep(5);
DELETE FROM myschema.debezium_signal WHERE id = 'ad-hoc-1';
INSERT INTO myschema.debezium_signal (id, type, data) VALUES('ad-hoc-1', 'execute-snapshot', '{"data-collections": ["schema1.products"],"type":"incremental", "additional-condition":"color=blue"}');
SELECT pg_sleep(5);
DELETE FROM myschema.debezium_signal WHERE id = 'ad-hoc-1';
INSERT INTO myschema.debezium_signal (id, type, data) VALUES('ad-hoc-1', 'execute-snapshot', '{"data-collections": ["schema1.products"],"type":"incremental", "additional-condition":"color=blue AND quantity>10"}');
