-- REPLICA IDENTITY USING INDEX on tables without a primary key (issue 11, class 3):
-- the connector keys the events by the index's columns, so an update changing
-- them becomes a delete (with __debezium.newkey), a tombstone and a create (with
-- __debezium.oldkey). ri_rev's index lists its columns in the reverse of table
-- order; ri_pk_idx has both a primary key and a different identity index. Without a
-- primary key the connector keys a table by its first unique index by name that
-- has no expression, whatever the replica identity: ri_two (identity on the second
-- index) and ri_expr (REPLICA IDENTITY FULL, an expression index first by name).
--
-- @modes: default

SET client_min_messages = warning;

CREATE TABLE ri_idx (code text NOT NULL, sub int NOT NULL, val text);
CREATE UNIQUE INDEX ri_idx_key ON ri_idx (code, sub);
ALTER TABLE ri_idx REPLICA IDENTITY USING INDEX ri_idx_key;

CREATE TABLE ri_rev (a int NOT NULL, b text NOT NULL, val text);
CREATE UNIQUE INDEX ri_rev_key ON ri_rev (b, a);
ALTER TABLE ri_rev REPLICA IDENTITY USING INDEX ri_rev_key;

CREATE TABLE ri_pk_idx (id int PRIMARY KEY, code text NOT NULL, val text);
CREATE UNIQUE INDEX ri_pk_idx_code ON ri_pk_idx (code);
ALTER TABLE ri_pk_idx REPLICA IDENTITY USING INDEX ri_pk_idx_code;

CREATE TABLE ri_two (x int NOT NULL, y int NOT NULL, val text);
CREATE UNIQUE INDEX ri_two_b ON ri_two (y);
CREATE UNIQUE INDEX ri_two_a ON ri_two (x);
ALTER TABLE ri_two REPLICA IDENTITY USING INDEX ri_two_b;

CREATE TABLE ri_expr (code text NOT NULL, n int NOT NULL, val text);
CREATE UNIQUE INDEX ri_expr_a ON ri_expr (lower(code));
CREATE UNIQUE INDEX ri_expr_b ON ri_expr (n);
ALTER TABLE ri_expr REPLICA IDENTITY FULL;

-- @changes

INSERT INTO ri_idx VALUES ('A', 1, 'x');
INSERT INTO ri_idx VALUES ('B', 2, 'y');
UPDATE ri_idx SET val = 'x2' WHERE code = 'A';
UPDATE ri_idx SET code = 'C' WHERE code = 'A';
UPDATE ri_idx SET sub = 3, val = 'y3' WHERE code = 'B';
DELETE FROM ri_idx WHERE code = 'C';
INSERT INTO ri_rev VALUES (1, 'one', 'v');
UPDATE ri_rev SET val = 'w' WHERE a = 1;
UPDATE ri_rev SET a = 2 WHERE a = 1;
DELETE FROM ri_rev WHERE a = 2;
INSERT INTO ri_pk_idx VALUES (1, 'K', 'v');
UPDATE ri_pk_idx SET code = 'L' WHERE id = 1;
DELETE FROM ri_pk_idx WHERE id = 1;
INSERT INTO ri_two VALUES (1, 10, 'v');
UPDATE ri_two SET val = 'w' WHERE x = 1;
UPDATE ri_two SET y = 20 WHERE x = 1;
UPDATE ri_two SET x = 2 WHERE x = 1;
DELETE FROM ri_two WHERE x = 2;
INSERT INTO ri_expr VALUES ('A', 1, 'v');
UPDATE ri_expr SET code = 'B' WHERE n = 1;
UPDATE ri_expr SET n = 2 WHERE n = 1;
DELETE FROM ri_expr WHERE n = 2;
