-- OVER aggregates on the event-time attribute: ROWS and RANGE frames.

-- case: over_rows_unbounded_count_sum
SELECT order_id, user_id, COUNT(*) OVER w AS c, SUM(qty) OVER w AS s FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
-- case: over_rows_preceding
SELECT order_id, SUM(amount) OVER (PARTITION BY currency ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM orders;
-- case: over_rows_min_max
SELECT order_id, MIN(price) OVER w AS mi, MAX(price) OVER w AS ma FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW);
-- case: over_range_interval
SELECT order_id, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW) AS c FROM orders;
-- case: over_range_interval_sum_avg
SELECT order_id, SUM(qty) OVER w AS s, AVG(price) OVER w AS a FROM orders WINDOW w AS (PARTITION BY currency ORDER BY ts RANGE BETWEEN INTERVAL '1' MINUTE PRECEDING AND CURRENT ROW);
-- case: over_range_unbounded
SELECT order_id, MAX(amount) OVER (PARTITION BY product ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS m FROM orders;
-- case: over_no_partition
SELECT id, COUNT(*) OVER (ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS c, SUM(score) OVER (ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS s FROM events;
-- case: over_avg_int
SELECT order_id, AVG(qty) OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS a FROM orders;
-- case: over_default_frame
SELECT order_id, SUM(qty) OVER (PARTITION BY user_id ORDER BY ts) AS s FROM orders;
-- case: over_count_column_nulls
SELECT order_id, COUNT(qty) OVER (PARTITION BY currency ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS c FROM orders;
-- case: over_on_json
SELECT id, kind, MIN(score) OVER (PARTITION BY kind ORDER BY ts RANGE BETWEEN INTERVAL '20' SECOND PRECEDING AND CURRENT ROW) AS m FROM events;
-- case: over_expression_argument
SELECT order_id, SUM(qty * price) OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS r FROM orders;
-- case: over_row_number_not_topn_refused
SELECT order_id, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn FROM orders;
-- case: over_rank_not_topn
SELECT order_id, RANK() OVER (PARTITION BY user_id ORDER BY ts) AS r FROM orders;
-- case: over_row_number_beside_sum
SELECT order_id, ROW_NUMBER() OVER w AS rn, SUM(amount) OVER w AS s FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
-- case: over_row_number_no_partition
SELECT order_id, ROW_NUMBER() OVER (ORDER BY ts) AS rn FROM orders WHERE order_id <= 12;
-- case: over_rank_dense_rank_ties
-- rows with equal times are RANGE peers: RANK skips after a tie, DENSE_RANK does not
CREATE TEMPORARY TABLE tied (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + (order_id / 3) * 1000, 3), WATERMARK FOR lt AS lt - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT order_id, RANK() OVER w AS r, DENSE_RANK() OVER w AS dr, COUNT(*) OVER w AS c FROM tied WINDOW w AS (PARTITION BY qty ORDER BY lt);
-- case: over_dense_rank_no_partition
CREATE TEMPORARY TABLE tied (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), lt AS TO_TIMESTAMP_LTZ(1709251200000 + (order_id / 4) * 1000, 3), WATERMARK FOR lt AS lt - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT order_id, DENSE_RANK() OVER (ORDER BY lt) AS dr, RANK() OVER (ORDER BY lt) AS r FROM tied;
-- case: over_rank_with_frame
SELECT order_id, RANK() OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS r FROM orders;
-- case: over_dense_rank_beside_sum
SELECT order_id, DENSE_RANK() OVER w AS dr, SUM(qty) OVER w AS s FROM orders WINDOW w AS (PARTITION BY currency ORDER BY ts);
