-- NOT NULL geometry and point columns (issue 11, class 8): the connector
-- declares a NOT NULL geometry(Point,4326) optional, and fills the zero point for
-- a NOT NULL point missing from a delete's before-image (REPLICA IDENTITY DEFAULT).
--
-- @modes: default

SET client_min_messages = warning;

CREATE TABLE geo_nn (
    id    int PRIMARY KEY,
    g     geometry(Point,4326) NOT NULL,
    g_any geometry NOT NULL,
    geog  geography NOT NULL,
    p     point NOT NULL,
    p_opt point
);

-- @changes

INSERT INTO geo_nn VALUES (1, 'SRID=4326;POINT(1 2)', 'POINT(3 4)', 'POINT(5 6)', '(7,8)', '(9,10)');
UPDATE geo_nn SET p = '(1,1)' WHERE id = 1;
DELETE FROM geo_nn WHERE id = 1;
