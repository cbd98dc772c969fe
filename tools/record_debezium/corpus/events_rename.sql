-- Tables renamed, or dropped and recreated, after a change and before the
-- connector reads the catalog (issue 11, class 7). Each DDL commits in the same
-- transaction as the change before it, so when the connector handles the change
-- the table it names no longer exists (renamed) or is another table (recreated).
--
-- @modes: default

SET client_min_messages = warning;

CREATE TABLE rn_a (id int PRIMARY KEY, v text);
CREATE TABLE rn_b (id int PRIMARY KEY, v text);

-- @changes

BEGIN;
INSERT INTO rn_a VALUES (1, 'x');
ALTER TABLE rn_a RENAME TO rn_a2;
COMMIT;
INSERT INTO rn_a2 VALUES (2, 'y');
BEGIN;
INSERT INTO rn_b VALUES (1, 'x');
DROP TABLE rn_b;
CREATE TABLE rn_b (code text PRIMARY KEY, n int);
COMMIT;
INSERT INTO rn_b VALUES ('k', 1);
