-- LAG / LEAD / FIRST_VALUE / LAST_VALUE over the event-time attribute on streams.

-- case: lag_default
SELECT order_id, user_id, qty, LAG(qty) OVER (PARTITION BY user_id ORDER BY ts) AS p FROM orders;
-- case: lag_offset_default_value
SELECT order_id, user_id, LAG(qty, 2, -1) OVER (PARTITION BY user_id ORDER BY ts) AS p2 FROM orders;
-- case: lag_offset_zero
SELECT order_id, LAG(qty, 0) OVER (PARTITION BY user_id ORDER BY ts) AS same FROM orders;
-- case: lag_nulls_are_rows
SELECT order_id, currency, LAG(currency) OVER (PARTITION BY user_id ORDER BY ts) AS p FROM orders;
-- case: lag_string_default
SELECT order_id, LAG(product, 1, 'none') OVER (PARTITION BY user_id ORDER BY ts) AS p FROM orders;
-- case: lag_decimal_with_sum
SELECT order_id, LAG(amount) OVER w AS p, SUM(qty) OVER w AS s FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts);
-- case: lag_rows_unbounded_frame
SELECT order_id, LAG(price) OVER w AS p, COUNT(*) OVER w AS c FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
-- case: lag_rows_bounded_frame
SELECT order_id, LAG(qty) OVER w AS p, SUM(qty) OVER w AS s FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW);
-- case: lag_no_partition
SELECT id, LAG(score, 3) OVER (ORDER BY ts) AS p FROM events;
-- case: lag_expression_argument
SELECT order_id, LAG(qty * 2 + 1, 1, 0) OVER (PARTITION BY currency ORDER BY ts) AS p FROM orders;
-- case: lag_default_of_other_type
SELECT order_id, LAG(qty, 1, 1.5) OVER (PARTITION BY user_id ORDER BY ts) AS p FROM orders;
-- case: lag_equal_timestamps
CREATE TEMPORARY TABLE t (k INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{tmp}/t', 'format' = 'csv', 'csv.null-literal' = '');
INSERT INTO t VALUES (1, 10, TIMESTAMP '2024-01-01 00:00:01'), (1, 20, TIMESTAMP '2024-01-01 00:00:02'), (1, 20, TIMESTAMP '2024-01-01 00:00:02'), (1, 20, TIMESTAMP '2024-01-01 00:00:02'), (1, CAST(NULL AS INT), TIMESTAMP '2024-01-01 00:00:03'), (1, 60, TIMESTAMP '2024-01-01 00:00:04'), (1, 60, TIMESTAMP '2024-01-01 00:00:04'), (2, 70, TIMESTAMP '2024-01-01 00:00:02');
SELECT k, v, ts, LAG(v) OVER (PARTITION BY k ORDER BY ts) AS p, SUM(v) OVER (PARTITION BY k ORDER BY ts) AS s FROM t;
-- case: lag_equal_timestamps_rows
CREATE TEMPORARY TABLE t (k INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{tmp}/t', 'format' = 'csv', 'csv.null-literal' = '');
INSERT INTO t VALUES (1, 10, TIMESTAMP '2024-01-01 00:00:01'), (1, 20, TIMESTAMP '2024-01-01 00:00:02'), (1, 20, TIMESTAMP '2024-01-01 00:00:02'), (1, 20, TIMESTAMP '2024-01-01 00:00:02'), (1, CAST(NULL AS INT), TIMESTAMP '2024-01-01 00:00:03'), (1, 60, TIMESTAMP '2024-01-01 00:00:04'), (1, 60, TIMESTAMP '2024-01-01 00:00:04'), (2, 70, TIMESTAMP '2024-01-01 00:00:02');
SELECT k, v, LAG(v, 2) OVER w AS p2, SUM(v) OVER w AS s FROM t WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
-- case: lead_refused
SELECT order_id, LEAD(qty) OVER (PARTITION BY user_id ORDER BY ts) AS nxt FROM orders;
-- case: first_last_value
SELECT order_id, FIRST_VALUE(qty) OVER w AS f, LAST_VALUE(qty) OVER w AS l FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts);
-- case: first_last_value_rows_bounded
SELECT order_id, FIRST_VALUE(product) OVER w AS f, LAST_VALUE(product) OVER w AS l FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW);
-- case: lag_default_cast
SELECT order_id, LAG(qty, 1, CAST(1.5 AS INT)) OVER (PARTITION BY user_id ORDER BY ts) AS p FROM orders;
-- case: lag_bigint_default_for_int
SELECT order_id, LAG(qty, 1, CAST(7 AS BIGINT)) OVER (PARTITION BY user_id ORDER BY ts) AS p FROM orders;
-- case: lag_offset_two_equal_timestamps
CREATE TEMPORARY TABLE t (k INT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{tmp}/t', 'format' = 'csv', 'csv.null-literal' = '');
INSERT INTO t VALUES (1, 10, TIMESTAMP '2024-01-01 00:00:01'), (1, 11, TIMESTAMP '2024-01-01 00:00:01.5'), (1, 20, TIMESTAMP '2024-01-01 00:00:02'), (1, 20, TIMESTAMP '2024-01-01 00:00:02'), (1, 30, TIMESTAMP '2024-01-01 00:00:03');
SELECT k, v, ts, LAG(v, 2, 0) OVER (PARTITION BY k ORDER BY ts) AS p FROM t;
-- case: lag_decimal_default_null_value
SELECT order_id, amount, LAG(amount, 1, CAST(0 AS DECIMAL(10, 2))) OVER (PARTITION BY currency ORDER BY ts) AS p FROM orders;
-- case: lag_boolean_and_double_default_null_value
SELECT id, LAG(flag, 1, TRUE) OVER w AS pf, LAG(score, 1, CAST(0.5 AS DOUBLE)) OVER w AS ps FROM events WINDOW w AS (PARTITION BY uid ORDER BY ts);
-- case: first_last_value_range_interval
SELECT order_id, FIRST_VALUE(amount) OVER w AS f, LAST_VALUE(currency) OVER w AS l, COUNT(*) OVER w AS c FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW);
-- case: first_last_value_timestamp
SELECT id, FIRST_VALUE(ts) OVER w AS f, LAST_VALUE(kind) OVER w AS l FROM events WINDOW w AS (PARTITION BY flag ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW);
