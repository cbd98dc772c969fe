-- column.propagate.source.type (issue 11, class 5): the connector adds the
-- __debezium.source.column.* parameters to the value's fields, not to the key's
-- nor to the __debezium.newkey/oldkey header schemas; a "char" column's length.
--
-- @modes: events-colsrc

SET client_min_messages = warning;

CREATE TABLE cs_t (
    id   int,
    k2   varchar(8),
    ch   "char",
    c5   char(5),
    v10  varchar(10),
    n    numeric(8,2),
    t    text,
    PRIMARY KEY (id, k2)
);

-- @changes

INSERT INTO cs_t VALUES (1, 'a', 'x', 'abc', 'vv', 1.25, 'text');
UPDATE cs_t SET t = 'changed' WHERE id = 1;
UPDATE cs_t SET id = 2 WHERE id = 1;
DELETE FROM cs_t WHERE id = 2;
