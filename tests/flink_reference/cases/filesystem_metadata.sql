-- METADATA columns of the filesystem connector (the file a row comes from) and their rules.

-- case: file_name_and_size
CREATE TEMPORARY TABLE u (user_id INT, name STRING, country STRING, age INT, n STRING METADATA FROM 'file.name' VIRTUAL, s BIGINT METADATA FROM 'file.size' VIRTUAL) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT user_id, n, s FROM u;
-- case: metadata_named_by_the_column
CREATE TEMPORARY TABLE u (user_id INT, name STRING, country STRING, age INT, `file.name` STRING METADATA VIRTUAL) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT `file.name`, COUNT(*) AS c FROM u GROUP BY `file.name`;
-- case: metadata_cast_to_the_declared_type
CREATE TEMPORARY TABLE u (user_id INT, name STRING, country STRING, age INT, s STRING METADATA FROM 'file.size' VIRTUAL) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT DISTINCT s FROM u;
-- case: metadata_in_a_computed_column_and_filter
CREATE TEMPORARY TABLE u (user_id INT, name STRING, country STRING, age INT, s BIGINT METADATA FROM 'file.size' VIRTUAL, half AS s / 2) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT name, half FROM u WHERE s > 10 AND user_id < 3;
-- case: unknown_metadata_key
CREATE TEMPORARY TABLE u (user_id INT, x STRING METADATA FROM 'file.owner' VIRTUAL) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT x FROM u;
-- case: metadata_of_an_uncastable_type
CREATE TEMPORARY TABLE u (user_id INT, x BOOLEAN METADATA FROM 'file.modification-time' VIRTUAL) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT x FROM u;
-- case: persisted_metadata_cannot_be_written
CREATE TEMPORARY TABLE w (a INT, p STRING METADATA FROM 'file.path') WITH ('connector' = 'filesystem', 'path' = '{tmp}/w', 'format' = 'csv');
INSERT INTO w VALUES (1, 'x');
SELECT a FROM w;
-- case: virtual_metadata_is_not_written
CREATE TEMPORARY TABLE w (a INT, n STRING METADATA FROM 'file.name' VIRTUAL) WITH ('connector' = 'filesystem', 'path' = '{tmp}/w', 'format' = 'csv');
INSERT INTO w VALUES (1), (2);
SELECT a, CHAR_LENGTH(n) > 0 AS named FROM w;
