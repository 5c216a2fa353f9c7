-- Partitioned filesystem tables (PARTITIONED BY): dynamic and static partitions written as
-- Hive-style directories under {tmp}, read back with the partition columns, filtered on them.

-- case: dynamic_partitions_round_trip
CREATE TEMPORARY TABLE sink (k INT, v STRING, dt STRING, hr INT) PARTITIONED BY (dt, hr) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink VALUES (1, 'a', '2024-03-01', 10), (2, 'b', '2024-03-01', 11), (3, 'c', '2024-03-02', 10), (6, 'f', 'x=y/z', 3), (8, 'h', ' ', 4);
SELECT * FROM sink;
-- case: default_partition_read_back
CREATE TEMPORARY TABLE sink (k INT, v STRING, dt STRING, hr INT) PARTITIONED BY (dt, hr) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink VALUES (1, 'a', '2024-03-01', 10), (4, 'd', CAST(NULL AS STRING), 1), (5, 'e', '', 2), (7, 'g', '2024-03-01', CAST(NULL AS INT));
SELECT * FROM sink;
-- case: escaped_partition_filter
CREATE TEMPORARY TABLE sink (k INT, v STRING, dt STRING, hr INT) PARTITIONED BY (dt, hr) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink VALUES (6, 'f', 'x=y/z', 3), (1, 'a', 'b', 3);
SELECT * FROM sink WHERE dt = 'x=y/z';
-- case: partition_filter_and_data_filter
CREATE TEMPORARY TABLE sink (k INT, v STRING, dt STRING, hr INT) PARTITIONED BY (dt, hr) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'csv');
INSERT INTO sink VALUES (1, 'a', '2024-03-01', 10), (2, 'b', '2024-03-01', 11), (3, 'c', '2024-03-02', 10), (4, 'd', '2024-03-01', 10);
SELECT k, hr FROM sink WHERE dt = '2024-03-01' AND k > 1;
-- case: partition_columns_only
CREATE TEMPORARY TABLE sink (k INT, dt STRING, hr INT) PARTITIONED BY (dt, hr) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'csv');
INSERT INTO sink VALUES (1, '2024-03-01', 10), (2, '2024-03-01', 11), (3, '2024-03-02', 10), (4, '2024-03-01', 10);
SELECT dt, hr, COUNT(*) AS c FROM sink GROUP BY dt, hr;
-- case: static_partition_insert
CREATE TEMPORARY TABLE sink (k INT, v STRING, dt STRING, hr INT) PARTITIONED BY (dt, hr) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink PARTITION (dt = '2024-03-05') SELECT user_id, name, 7 FROM users;
SELECT * FROM sink;
-- case: static_partition_both_keys
CREATE TEMPORARY TABLE sink (k INT, v STRING, dt STRING, hr INT) PARTITIONED BY (dt, hr) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink PARTITION (dt = '2024-03-06', hr = 1) SELECT id, CAST(i AS STRING) FROM nums WHERE id <= 3;
SELECT * FROM sink WHERE hr = 1;
