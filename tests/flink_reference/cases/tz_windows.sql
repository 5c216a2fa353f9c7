-- case: tumble_hour_shanghai
-- hour windows on a TIMESTAMP_LTZ rowtime: bounds are Shanghai wall-clock time
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 1200000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end;
-- case: tumble_day_shanghai
-- a day window starts at Shanghai midnight (16:00 UTC)
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 7200000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY)) GROUP BY window_start, window_end;
-- case: tumble_hour_kolkata_half_hour_offset
-- a zone half an hour off UTC shifts hour windows by 30 minutes
SET 'table.local-time-zone' = 'Asia/Kolkata';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end;
-- case: tumble_hour_la_spring_forward
-- 2026-03-08 02:00 does not exist in Los Angeles: no [02:00, 03:00) window
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1772942400000 + order_id * 1800000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end;
-- case: tumble_day_la_spring_forward
-- the 2026-03-08 day window in Los Angeles holds 23 hours
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1772942400000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY)) GROUP BY window_start, window_end;
-- case: tumble_hour_la_fall_back
-- 01:00-02:00 happens twice on 2026-11-01 in Los Angeles: the window holds both hours
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end;
-- case: tumble_day_la_fall_back
-- the 2026-11-01 day window in Los Angeles holds 25 hours
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793473200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY)) GROUP BY window_start, window_end;
-- case: tumble_tvf_columns_la_fall_back
-- the TVF alone: window_start/window_end TIMESTAMP(3) wall-clock, window_time TIMESTAMP_LTZ(3)
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT order_id, lt, window_start, window_end, window_time FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) WHERE order_id BETWEEN 2 AND 14;
-- case: tumble_window_time_la_fall_back
-- window_time of an aggregated window, and the cast of the bounds
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, window_time, CAST(window_start AS STRING) AS s, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end, window_time;
-- case: hop_shanghai
-- HOP on a TIMESTAMP_LTZ rowtime, aligned in Shanghai
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(HOP(TABLE t, DESCRIPTOR(lt), INTERVAL '6' HOUR, INTERVAL '1' DAY)) GROUP BY window_start, window_end;
-- case: hop_la_spring_forward
-- HOP across the spring-forward gap in Los Angeles
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1772942400000 + order_id * 1800000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(HOP(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR, INTERVAL '2' HOUR)) GROUP BY window_start, window_end;
-- case: cumulate_shanghai
-- CUMULATE on a TIMESTAMP_LTZ rowtime, aligned in Shanghai
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(lt), INTERVAL '6' HOUR, INTERVAL '1' DAY)) GROUP BY window_start, window_end;
-- case: cumulate_la_fall_back
-- CUMULATE over the day that repeats an hour in Los Angeles
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793473200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(lt), INTERVAL '8' HOUR, INTERVAL '1' DAY)) GROUP BY window_start, window_end;
-- case: session_shanghai
-- SESSION on a TIMESTAMP_LTZ rowtime: bounds in Shanghai wall-clock time
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 1200000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT user_id, window_start, window_end, COUNT(*) AS c FROM TABLE(SESSION(TABLE t PARTITION BY user_id, DESCRIPTOR(lt), INTERVAL '50' MINUTE)) GROUP BY user_id, window_start, window_end;
-- case: session_la_fall_back
-- SESSION across the repeated hour in Los Angeles
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(SESSION(TABLE t, DESCRIPTOR(lt), INTERVAL '20' MINUTE)) WHERE order_id NOT IN (9, 10, 11) GROUP BY window_start, window_end;
-- case: group_window_tumble_shanghai
-- legacy GROUP BY TUMBLE on a TIMESTAMP_LTZ rowtime with TUMBLE_START/END/ROWTIME
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 7200000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT TUMBLE_START(lt, INTERVAL '1' DAY) AS s, TUMBLE_END(lt, INTERVAL '1' DAY) AS e, TUMBLE_ROWTIME(lt, INTERVAL '1' DAY) AS r, COUNT(*) AS c FROM t GROUP BY TUMBLE(lt, INTERVAL '1' DAY);
-- case: group_window_tumble_la_fall_back
-- legacy GROUP BY TUMBLE over the repeated hour in Los Angeles
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT TUMBLE_START(lt, INTERVAL '1' HOUR) AS s, TUMBLE_END(lt, INTERVAL '1' HOUR) AS e, COUNT(*) AS c FROM t GROUP BY TUMBLE(lt, INTERVAL '1' HOUR);
-- case: group_window_hop_session_shanghai
-- legacy HOP and SESSION group windows on a TIMESTAMP_LTZ rowtime
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT HOP_START(lt, INTERVAL '6' HOUR, INTERVAL '1' DAY) AS s, HOP_END(lt, INTERVAL '6' HOUR, INTERVAL '1' DAY) AS e, COUNT(*) AS c FROM t GROUP BY HOP(lt, INTERVAL '6' HOUR, INTERVAL '1' DAY);
-- case: group_window_session_shanghai
-- legacy SESSION group window on a TIMESTAMP_LTZ rowtime
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 1200000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT user_id, SESSION_START(lt, INTERVAL '50' MINUTE) AS s, SESSION_END(lt, INTERVAL '50' MINUTE) AS e, COUNT(*) AS c FROM t GROUP BY user_id, SESSION(lt, INTERVAL '50' MINUTE);
-- case: window_topn_shanghai
-- window Top-N over day windows aligned in Shanghai
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 7200000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT * FROM (SELECT window_start, window_end, order_id, amount, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY amount DESC) AS rn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY))) WHERE rn <= 2;
-- case: window_join_shanghai
-- window join of two TVFs on a TIMESTAMP_LTZ rowtime, day windows in Shanghai
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 7200000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT a.window_start, a.window_end, a.order_id, b.order_id AS other FROM (SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY)) WHERE order_id % 5 = 0) AS a JOIN (SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY)) WHERE order_id % 7 = 0) AS b ON a.window_start = b.window_start AND a.window_end = b.window_end;
-- case: tumble_ltz_utc
-- in UTC, windows on a TIMESTAMP_LTZ rowtime are typed TIMESTAMP(3) too
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '6' HOUR)) GROUP BY window_start, window_end;
-- case: tumble_offset_shanghai
-- a window offset applies on top of the session-zone alignment
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY, INTERVAL '2' HOUR)) GROUP BY window_start, window_end;
-- case: cascade_la_fall_back
-- a window aggregation over a zoned window aggregation's window_start/window_end
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, SUM(c) AS total, COUNT(*) AS users FROM (SELECT window_start, window_end, user_id, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end, user_id) GROUP BY window_start, window_end;
-- case: tumble_over_window_time_la_fall_back
-- window_time of a zoned window aggregation is a TIMESTAMP_LTZ time attribute: a day window over it aligns in the zone again
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TEMPORARY VIEW hourly AS SELECT window_time AS wt, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end, window_time;
SELECT window_start, window_end, SUM(c) AS total FROM TABLE(TUMBLE(TABLE hourly, DESCRIPTOR(wt), INTERVAL '3' HOUR)) GROUP BY window_start, window_end;
-- case: window_dedup_la_fall_back
-- window deduplication (first row per wall-clock hour) over the repeated hour
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, order_id FROM (SELECT window_start, window_end, order_id, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY lt) AS rn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR))) WHERE rn = 1;
-- case: window_join_la_fall_back
-- window join on hour windows over the repeated hour
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT a.window_start, a.window_end, COUNT(*) AS pairs FROM (SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) WHERE order_id % 2 = 0) AS a JOIN (SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) WHERE order_id % 2 = 1) AS b ON a.window_start = b.window_start AND a.window_end = b.window_end GROUP BY a.window_start, a.window_end;
-- case: group_window_rowtime_la_fall_back
-- TUMBLE_ROWTIME of a legacy window over the repeated hour is the earlier instant
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT TUMBLE_START(lt, INTERVAL '1' HOUR) AS s, TUMBLE_ROWTIME(lt, INTERVAL '1' HOUR) AS r, CAST(TUMBLE_ROWTIME(lt, INTERVAL '1' HOUR) AS STRING) AS rs, COUNT(*) AS c FROM t GROUP BY TUMBLE(lt, INTERVAL '1' HOUR);
-- case: cumulate_kolkata
-- CUMULATE in a zone half an hour off UTC
SET 'table.local-time-zone' = 'Asia/Kolkata';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 1200000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(lt), INTERVAL '2' HOUR, INTERVAL '6' HOUR)) GROUP BY window_start, window_end;
-- case: hop_offset_la_spring_forward
-- HOP with an offset across the spring-forward gap
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1772942400000 + order_id * 1800000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(HOP(TABLE t, DESCRIPTOR(lt), INTERVAL '3' HOUR, INTERVAL '6' HOUR, INTERVAL '1' HOUR)) GROUP BY window_start, window_end;
-- case: window_start_filter_shanghai
-- window_start is TIMESTAMP wall-clock time: compared with a TIMESTAMP literal
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '6' HOUR)) WHERE window_start >= TIMESTAMP '2024-03-01 12:00:00' GROUP BY window_start, window_end;
-- case: tvf_window_time_cast_shanghai
-- the TVF's window_time cast to STRING shows Shanghai wall-clock time
SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 18000000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT order_id, CAST(window_start AS STRING) AS s, CAST(window_time AS STRING) AS wt, window_time FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY)) WHERE order_id <= 6;
-- case: session_partitioned_la_fall_back
-- SESSION PARTITION BY over the repeated hour
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT user_id, window_start, window_end, COUNT(*) AS c FROM TABLE(SESSION(TABLE t PARTITION BY user_id, DESCRIPTOR(lt), INTERVAL '40' MINUTE)) GROUP BY user_id, window_start, window_end;
-- case: window_time_instant_la_fall_back
-- window_time of the repeated hour's window is its earlier instant (119 minutes after 00:00 PDT, not 179)
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, TIMESTAMPDIFF(MINUTE, TO_TIMESTAMP_LTZ(1793516400000, 3), window_time) AS minutes, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' HOUR)) GROUP BY window_start, window_end, window_time;
-- case: group_window_rowtime_instant_la_fall_back
-- TUMBLE_ROWTIME of the repeated hour's window is its earlier instant
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT TUMBLE_START(lt, INTERVAL '1' HOUR) AS s, TIMESTAMPDIFF(MINUTE, TO_TIMESTAMP_LTZ(1793516400000, 3), TUMBLE_ROWTIME(lt, INTERVAL '1' HOUR)) AS minutes, COUNT(*) AS c FROM t GROUP BY TUMBLE(lt, INTERVAL '1' HOUR);
-- case: session_window_time_la_fall_back
-- a session ending in the repeated hour: window_time is the earlier instant
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TEMPORARY VIEW early AS SELECT * FROM t WHERE order_id <= 6;
SELECT window_start, window_end, TIMESTAMPDIFF(MINUTE, TO_TIMESTAMP_LTZ(1793516400000, 3), window_time) AS minutes, COUNT(*) AS c FROM TABLE(SESSION(TABLE early, DESCRIPTOR(lt), INTERVAL '20' MINUTE)) GROUP BY window_start, window_end, window_time;
-- case: hop_window_time_la_fall_back
-- HOP windows ending in the repeated hour: window_time is the earlier instant
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1793516400000 + order_id * 900000, 3), WATERMARK FOR lt AS lt - INTERVAL '3' DAY)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, TIMESTAMPDIFF(MINUTE, TO_TIMESTAMP_LTZ(1793516400000, 3), window_time) AS minutes, COUNT(*) AS c FROM TABLE(HOP(TABLE t, DESCRIPTOR(lt), INTERVAL '30' MINUTE, INTERVAL '1' HOUR)) WHERE order_id <= 16 GROUP BY window_start, window_end, window_time;
-- case: tumble_day_la_fired_mid_stream
-- a 1-second watermark delay: Flink fires each Los Angeles day as the rows pass its end (a zone with daylight saving flushes its window buffer at the zone's day ends, so no row is lost)
SET 'table.local-time-zone' = 'America/Los_Angeles';
CREATE TEMPORARY TABLE t (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + order_id * 3600000, 3), WATERMARK FOR lt AS lt - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT window_start, window_end, COUNT(*) AS c, MIN(order_id) AS lo, MAX(order_id) AS hi FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(lt), INTERVAL '1' DAY)) GROUP BY window_start, window_end;
