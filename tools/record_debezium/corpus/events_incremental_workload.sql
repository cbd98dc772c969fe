-- Ad hoc incremental snapshots under a concurrent workload (issue 21): one signal asks
-- for two tables (single and composite keys) and a one-row marker table last; while
-- the connector reads them in chunks of 10, a workload of 200 small transactions updates,
-- deletes, inserts and changes keys. The interleaving depends on timing, so
-- tests/adapters/test_incremental_golden.py checks what any correct run gives: replaying
-- the records (the last event per key) gives the tables' final rows, and every row the
-- workload never touched is read exactly once. The workload itself is deterministic, so
-- the test computes the final rows by running the same SQL. The recorder waits for the
-- marker table's read event (the last table of the snapshot).
--
-- @modes: incremental-workload
-- @extensions: plpgsql
-- @wait-reads: 1 public.wl_zz_done

SET client_min_messages = warning;

CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL,
                              data varchar(2048) NULL);
CREATE TABLE wl_single (id int PRIMARY KEY, v int NOT NULL, note text);
CREATE TABLE wl_pair (a int, b int, v int NOT NULL, PRIMARY KEY (a, b));
CREATE TABLE wl_zz_done (id int PRIMARY KEY);
INSERT INTO wl_single SELECT g, g, 'row ' || g FROM generate_series(1, 200) g;
INSERT INTO wl_pair SELECT g / 20, g % 20, g FROM generate_series(0, 199) g;
INSERT INTO wl_zz_done VALUES (1);

-- @changes

INSERT INTO debezium_signal VALUES ('ad-hoc-wl', 'execute-snapshot', '{"data-collections": ["public.wl_single", "public.wl_pair", "public.wl_zz_done"]}');
DO $$
BEGIN
  FOR i IN 1..200 LOOP
    IF i % 3 = 0 THEN
      UPDATE wl_single SET v = v + 1000, note = 'upd ' || i WHERE id = (i * 37) % 200 + 1;
    END IF;
    UPDATE wl_pair SET v = v + 1000 WHERE a = (i * 7) % 10 AND b = (i * 3) % 20;
    IF i % 7 = 0 THEN
      DELETE FROM wl_single WHERE id = (i * 13) % 200 + 1;
    END IF;
    IF i % 11 = 0 THEN
      INSERT INTO wl_single VALUES (1000 + i, i, 'new ' || i);
      INSERT INTO wl_pair VALUES (100 + i, 0, i);
    END IF;
    IF i % 29 = 0 THEN
      UPDATE wl_single SET id = 5000 + i WHERE id = (i * 17) % 200 + 1;
      UPDATE wl_pair SET b = 50 + i WHERE a = (i * 5) % 10 AND b = (i * 11) % 20;
    END IF;
    COMMIT;
    PERFORM pg_sleep(0.005);
  END LOOP;
END $$;
