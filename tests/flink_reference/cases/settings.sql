-- Sinks (INSERT INTO, STATEMENT SET, the NOT NULL enforcer), SET keys, hints and session time zones.
-- Sink tables live under {tmp}, a fresh folder per run; the query after the INSERT reads them back.

-- case: insert_select_then_read
CREATE TEMPORARY TABLE sink (order_id INT, amount DECIMAL(10, 2)) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink SELECT order_id, amount FROM orders WHERE order_id <= 6;
SELECT * FROM sink;
-- case: insert_values_then_read
CREATE TEMPORARY TABLE sink (k INT, v STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'csv', 'csv.null-literal' = '');
INSERT INTO sink VALUES (1, 'a'), (2, CAST(NULL AS STRING)), (3, 'ü');
SELECT * FROM sink;
-- case: insert_casts_to_sink_types
CREATE TEMPORARY TABLE sink (k BIGINT, v DOUBLE, s STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink SELECT id, i, CAST(m AS STRING) FROM nums WHERE id <= 3;
SELECT * FROM sink;
-- case: statement_set_two_inserts
CREATE TEMPORARY TABLE a (k INT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/a', 'format' = 'json');
CREATE TEMPORARY TABLE b (k INT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/b', 'format' = 'json');
EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT user_id FROM users; INSERT INTO b SELECT id FROM nums; END;
SELECT 'a' AS t, k FROM a UNION ALL SELECT 'b', k FROM b;
-- case: not_null_sink_enforcer_error
CREATE TEMPORARY TABLE sink (k INT NOT NULL, v STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink SELECT user_id, name FROM users;
SELECT * FROM sink;
-- case: not_null_sink_enforcer_drop
SET 'table.exec.sink.not-null-enforcer' = 'DROP';
CREATE TEMPORARY TABLE sink (k INT NOT NULL, v STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink SELECT user_id, name FROM users;
SELECT * FROM sink;
-- case: not_null_sink_no_nulls
CREATE TEMPORARY TABLE sink (k INT NOT NULL) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink SELECT user_id FROM users WHERE user_id IS NOT NULL;
SELECT * FROM sink;
-- case: set_pipeline_name_accepted
SET 'pipeline.name' = 'reference case';
SELECT COUNT(*) AS c FROM users;
-- case: set_unknown_key_accepted
SET 'my.own.key' = 'anything';
SELECT COUNT(*) AS c FROM users;
-- case: set_twice_last_wins
SET 'table.local-time-zone' = 'Asia/Tokyo';
SET 'table.local-time-zone' = 'Europe/London';
SELECT id, TO_TIMESTAMP_LTZ(1709287200000, 3) AS l FROM events WHERE id = 1;
-- case: hint_options_path
SELECT COUNT(*) AS c FROM nums /*+ OPTIONS('path' = '{data}/nums.csv') */ WHERE i > 0;
-- case: hint_state_ttl_join
SELECT /*+ STATE_TTL('o' = '1d', 'u' = '1d') */ o.order_id, u.name FROM orders AS o JOIN users AS u ON o.user_id = u.user_id WHERE o.order_id <= 10;
-- case: hint_state_ttl_aggregate
SELECT /*+ STATE_TTL('orders' = '1h') */ user_id, COUNT(*) AS c FROM orders GROUP BY user_id;
-- case: hint_unknown_ignored
SELECT /*+ NOT_A_HINT('x') */ COUNT(*) AS c FROM users;
-- case: tz_from_unixtime
SET 'table.local-time-zone' = 'Asia/Kolkata';
SELECT id, FROM_UNIXTIME(1709287200) AS f FROM events WHERE id = 1;
-- case: tz_unix_timestamp_of_string
SET 'table.local-time-zone' = 'America/Los_Angeles';
SELECT id, UNIX_TIMESTAMP('2024-03-01 10:00:00') AS u FROM events WHERE id = 1;
-- case: tz_cast_timestamp_to_ltz
SET 'table.local-time-zone' = 'Europe/Berlin';
SELECT id, CAST(ts AS TIMESTAMP_LTZ(3)) AS l, CAST(CAST(ts AS TIMESTAMP_LTZ(3)) AS STRING) AS s FROM events WHERE id <= 2;
-- case: tz_cast_ltz_to_timestamp
SET 'table.local-time-zone' = 'Asia/Tokyo';
SELECT id, CAST(TO_TIMESTAMP_LTZ(id * 3600000, 3) AS TIMESTAMP(3)) AS t FROM events WHERE id <= 3;
-- case: tz_ltz_to_string
SET 'table.local-time-zone' = 'America/New_York';
SELECT id, CAST(TO_TIMESTAMP_LTZ(1709287200123, 3) AS STRING) AS s FROM events WHERE id = 1;
-- case: tz_date_format_ltz
SET 'table.local-time-zone' = 'Asia/Shanghai';
SELECT id, DATE_FORMAT(TO_TIMESTAMP_LTZ(1709287200000, 3), 'yyyy-MM-dd HH:mm') AS d FROM events WHERE id = 1;
-- case: tz_to_timestamp_ltz_seconds
SET 'table.local-time-zone' = 'UTC';
SELECT id, TO_TIMESTAMP_LTZ(id, 0) AS l FROM events WHERE id <= 2;
-- case: tz_window_on_ltz_rowtime
-- a day window on a TIMESTAMP_LTZ time attribute is aligned to midnight in the session time zone
SET 'table.local-time-zone' = 'Asia/Tokyo';
CREATE TEMPORARY TABLE hourly (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE hourly, DESCRIPTOR(lt), INTERVAL '1' DAY)) GROUP BY window_start, window_end;
-- case: tz_window_on_ltz_rowtime_utc
CREATE TEMPORARY TABLE hourly (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE hourly, DESCRIPTOR(lt), INTERVAL '1' DAY)) GROUP BY window_start, window_end;
-- case: tz_window_hour_on_ltz_rowtime
SET 'table.local-time-zone' = 'Asia/Kolkata';
CREATE TEMPORARY TABLE hourly (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 600000, 3), WATERMARK FOR lt AS lt - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE hourly, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end;
-- case: hint_state_ttl_unknown_key
SELECT /*+ STATE_TTL('foo' = '1d') */ o.order_id FROM orders AS o JOIN users AS u ON o.user_id = u.user_id;
-- case: hint_state_ttl_distinct
SELECT /*+ STATE_TTL('orders' = '1h') */ DISTINCT user_id FROM orders;
-- case: tz_extract_fields_of_ltz
SET 'table.local-time-zone' = 'Asia/Tokyo';
SELECT id, EXTRACT(HOUR FROM TO_TIMESTAMP_LTZ(id * 3600000, 3)) AS h, HOUR(TO_TIMESTAMP_LTZ(id * 3600000, 3)) AS h2, EXTRACT(DAY FROM TO_TIMESTAMP_LTZ(id * 3600000, 3)) AS d, MINUTE(TO_TIMESTAMP_LTZ(id * 60000 + 1800000, 3)) AS mi FROM events WHERE id <= 3;
-- case: tz_floor_ceil_ltz
SET 'table.local-time-zone' = 'Asia/Kolkata';
SELECT id, FLOOR(TO_TIMESTAMP_LTZ(id * 3600000, 3) TO DAY) AS fd, CEIL(TO_TIMESTAMP_LTZ(id * 3600000, 3) TO HOUR) AS ch FROM events WHERE id <= 3;
-- case: tz_date_of_ltz
SET 'table.local-time-zone' = 'America/Los_Angeles';
SELECT id, CAST(TO_TIMESTAMP_LTZ(id * 3600000, 3) AS DATE) AS d, DATE_FORMAT(TO_TIMESTAMP_LTZ(id * 3600000, 3), 'yyyy-MM-dd HH:mm') AS f FROM events WHERE id <= 3;
-- case: tz_timestampadd_diff_ltz
SET 'table.local-time-zone' = 'Asia/Tokyo';
SELECT id, TIMESTAMPADD(DAY, 1, TO_TIMESTAMP_LTZ(id * 3600000, 3)) AS a, TIMESTAMPDIFF(DAY, TO_TIMESTAMP_LTZ(0, 3), TO_TIMESTAMP_LTZ(id * 54000000, 3)) AS dd, TIMESTAMPDIFF(HOUR, TO_TIMESTAMP_LTZ(0, 3), TO_TIMESTAMP_LTZ(id * 5400000, 3)) AS dh FROM events WHERE id <= 3;
-- case: tz_ltz_plus_interval_and_cast
SET 'table.local-time-zone' = 'America/Los_Angeles';
SELECT id, TO_TIMESTAMP_LTZ(1710054000000 + id * 3600000, 3) + INTERVAL '1' DAY AS p, CAST(TO_TIMESTAMP_LTZ(1710054000000 + id * 3600000, 3) AS TIMESTAMP(3)) AS c, CAST(TO_TIMESTAMP_LTZ(1710054000000 + id * 3600000, 3) AS STRING) AS s FROM events WHERE id <= 3;
-- case: tz_ltz_compared_with_timestamp
SET 'table.local-time-zone' = 'Asia/Tokyo';
SELECT id FROM events WHERE id <= 6 AND TO_TIMESTAMP_LTZ(id * 3600000, 3) > CAST(TIMESTAMP '1970-01-01 12:30:00' AS TIMESTAMP_LTZ(3));
-- case: tz_to_timestamp_and_unix
SET 'table.local-time-zone' = 'Asia/Kolkata';
SELECT id, UNIX_TIMESTAMP('1970-01-01 05:30:00') AS u, TO_TIMESTAMP('1970-01-01 05:30:00') AS t, FROM_UNIXTIME(id * 1800) AS f FROM events WHERE id <= 2;
-- case: convert_tz_forms
SELECT CONVERT_TZ('1970-01-01 00:00:00', 'UTC', 'America/Los_Angeles') AS a, CONVERT_TZ('2024-03-10 01:30:00', 'PST', 'GMT+08:00') AS b, CONVERT_TZ('2024-01-01 00:00:00', 'Asia/Kolkata', 'UTC') AS c, CONVERT_TZ(CAST(NULL AS STRING), 'UTC', 'UTC') AS d, CONVERT_TZ('2024-11-03 01:30:00', 'America/New_York', 'UTC') AS e;
-- case: current_watermark_late_row_filter
SELECT order_id FROM orders WHERE CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts);
