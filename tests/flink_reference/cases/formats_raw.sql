-- The raw format through the filesystem connector: one value per line, numbers in binary.

-- case: raw_reads_the_lines_of_a_file
CREATE TEMPORARY TABLE lines (line STRING) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'raw');
SELECT line, CHAR_LENGTH(line) AS n FROM lines;
-- case: raw_lines_as_bytes
CREATE TEMPORARY TABLE lines (line BYTES) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'raw');
SELECT line FROM lines WHERE line IS NOT NULL;
-- case: raw_string_round_trip
CREATE TEMPORARY TABLE r (v STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw');
INSERT INTO r SELECT COALESCE(name, '') FROM users;
SELECT v FROM r;
-- case: raw_int_null_cannot_be_written
CREATE TEMPORARY TABLE r (v INT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw');
INSERT INTO r SELECT user_id * 1000 FROM users;
SELECT v FROM r;
-- case: raw_int_round_trip_without_nulls
CREATE TEMPORARY TABLE r (v INT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw');
INSERT INTO r SELECT user_id * 1000 FROM users WHERE user_id IS NOT NULL;
SELECT v FROM r;
-- case: raw_bigint_little_endian_read_big_endian
CREATE TEMPORARY TABLE w (v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw', 'raw.endianness' = 'little-endian');
CREATE TEMPORARY TABLE r (v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw');
INSERT INTO w VALUES (CAST(2 AS BIGINT)), (CAST(256 AS BIGINT));
SELECT v FROM r;
-- case: raw_double_round_trip
CREATE TEMPORARY TABLE r (v DOUBLE) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw');
INSERT INTO r VALUES (1.5), (-0.25);
SELECT v FROM r;
-- case: raw_charset
CREATE TEMPORARY TABLE w (v STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw', 'raw.charset' = 'UTF-16BE');
CREATE TEMPORARY TABLE r (v BYTES) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw');
INSERT INTO w VALUES ('Ab');
SELECT v FROM r;
-- case: raw_needs_one_column
CREATE TEMPORARY TABLE r (a INT, b INT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw');
SELECT a FROM r;
-- case: raw_refuses_a_date_column
CREATE TEMPORARY TABLE r (d DATE) WITH ('connector' = 'filesystem', 'path' = '{tmp}/r', 'format' = 'raw');
SELECT d FROM r;
