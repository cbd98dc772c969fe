-- Ad hoc incremental snapshots of a partitioned table (issue 21; the PostgreSQL
-- IncrementalSnapshotIT.snapshotPartitionedTable): the signal names the partitioned
-- parent and, in a second signal, one partition. The publication is FOR ALL TABLES
-- without publish_via_partition_root, so streamed changes carry the partitions' names.
--
-- @modes: incremental-partitioned
-- @extensions: plpgsql
-- @wait-reads: 7

SET client_min_messages = warning;

CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL,
                              data varchar(2048) NULL);
CREATE TABLE part (pk int, aa integer, PRIMARY KEY (pk, aa)) PARTITION BY RANGE (aa);
CREATE TABLE part1 PARTITION OF part FOR VALUES FROM (0) TO (500);
CREATE TABLE part2 PARTITION OF part FOR VALUES FROM (500) TO (1000);
INSERT INTO part VALUES (1, 10), (2, 600), (3, 20), (4, 700), (5, 30);

-- @changes

INSERT INTO debezium_signal VALUES ('ad-hoc-parent', 'execute-snapshot', '{"data-collections": ["public.part"]}');
INSERT INTO debezium_signal VALUES ('ad-hoc-partition', 'execute-snapshot', '{"data-collections": ["public.part2"]}');
