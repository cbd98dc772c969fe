-- Built-in tables corpus: table.ignore.builtin (true by default) leaves out what the
-- connector calls built-in tables (PostgresConnectorConfig.SystemTablesPredicate):
-- the schemas pg_catalog and information_schema, pg_temp*, and PostGIS's
-- spatial_ref_sys, which the extension creates in a user schema and a publication
-- FOR ALL TABLES publishes. A change to it must not become a record; the changes
-- around it must.
--
-- Recorded by tools/record_debezium/record.py (see types.sql for the format).
--
-- @modes: events-default
-- @extensions: postgis

SET client_min_messages = warning;

CREATE TABLE builtin_neighbour (
    id int PRIMARY KEY,
    note text
);

-- @changes

INSERT INTO builtin_neighbour VALUES (1, 'before');
INSERT INTO spatial_ref_sys (srid, auth_name, auth_srid, srtext, proj4text)
    VALUES (990001, 'pgcdc', 990001, 'LOCAL_CS["test"]', '');
BEGIN;
UPDATE spatial_ref_sys SET auth_name = 'pgcdc2' WHERE srid = 990001;
INSERT INTO builtin_neighbour VALUES (2, 'same transaction');
COMMIT;
DELETE FROM spatial_ref_sys WHERE srid = 990001;
INSERT INTO builtin_neighbour VALUES (3, 'after');
