-- The initial snapshot's markers at the edges (issue 13): the first and the last table
-- in the snapshot's (name) order are empty; the rows are in the tables between. The
-- connector marks by table position, empty tables included: no record is "first"; the
-- very last record is "last" although empty tables follow.
--
-- @modes: snapshot-initial
-- @extensions: hstore

SET client_min_messages = warning;

CREATE TABLE a_empty (id int PRIMARY KEY);
CREATE TABLE m_one (id int PRIMARY KEY, v text);
CREATE TABLE m_two (id int PRIMARY KEY, v text);
CREATE TABLE zz_empty (id int PRIMARY KEY);
INSERT INTO m_one VALUES (1, 'alone');
INSERT INTO m_two VALUES (1, 'one'), (2, 'two');

-- @changes

INSERT INTO zz_empty VALUES (1);
