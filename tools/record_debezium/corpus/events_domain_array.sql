-- Arrays of domains (issue 11, class 6): with include.unknown.datatypes=true the
-- connector emits them as arrays of bytes; without it, it drops the column.
--
-- @modes: default events-unknown

SET client_min_messages = warning;

CREATE DOMAIN d_txt AS text;
CREATE DOMAIN d_num AS int;
CREATE TABLE da_t (id int PRIMARY KEY, a d_txt[], n d_num[], plain d_txt);

-- @changes

INSERT INTO da_t VALUES (1, '{bar,baz}', '{1,2}', 'p');
INSERT INTO da_t VALUES (2, '{}', '{3,NULL}', NULL);
INSERT INTO da_t VALUES (3, NULL, NULL, 'q');
UPDATE da_t SET a = '{"with space","x,y"}' WHERE id = 1;
