-- Escapes corpus: text that holds a backslash followed by "u" (Windows paths, TeX,
-- JSON escapes written as text), quotes and control characters, in every
-- string-carrying type: text, varchar, char(n), citext, json, jsonb, xml, text[],
-- hstore, a text key, and logical message content. The JSON writer must keep them
-- byte for byte (a Jackson upper-case pass once rewrote C:\users as C:\uSERS).
--
-- Recorded by tools/record_debezium/record.py (see types.sql for the format).
--
-- @modes: events-default escapes-hstore-map
-- @extensions: hstore citext

SET client_min_messages = warning;

CREATE TABLE esc_text (
    k     text PRIMARY KEY,
    t     text,
    v     varchar(60),
    c     char(24),
    ci    citext,
    j     json,
    jb    jsonb,
    x     xml,
    arr   text[],
    h     hstore
);

-- @changes

INSERT INTO esc_text VALUES (
    E'C:\\users\\bob',
    E'C:\\users\\bob',
    E'\\usepackage{x}',
    E'\\u00e9\\U0001',
    E'\\uffff and \\\\u0041',
    E'{"path": "C:\\\\users", "esc": "\\u00e9"}',
    E'{"path": "C:\\\\users", "text": "\\\\u00e9"}',
    E'<p>\\users &amp; \\u0041</p>',
    ARRAY[E'\\users', E'a\\u0001b', E'quote " and \\\\'],
    hstore(ARRAY[E'\\ukey', 'plain'], ARRAY[E'\\uvalue', E'\\\\u00E9'])
);
INSERT INTO esc_text VALUES (
    E'ctl\\u',
    E'tab\there\x01\x1f end\\u',
    E'\\\\\\u',
    E'\\',
    E'\\users',
    '"\\u0041"',
    '"\\u0041\\\\users"',
    NULL,
    '{}',
    ''
);
UPDATE esc_text SET t = E'D:\\Users\\uwe\\unicode' WHERE k = E'C:\\users\\bob';
SELECT pg_logical_emit_message(true, 'esc', E'C:\\users\\u00e9');
SELECT pg_logical_emit_message(false, 'esc', E'\\usepackage');
DELETE FROM esc_text WHERE k = E'ctl\\u';
