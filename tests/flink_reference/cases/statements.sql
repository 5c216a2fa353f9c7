-- Statements and query structure: views, CTEs, subqueries, SET, DISTINCT, VALUES, LIMIT.

-- case: select_star
SELECT * FROM users;
-- case: select_columns_renamed
SELECT name AS who, age + 1 AS next_age FROM users;
-- case: view_then_select
CREATE TEMPORARY VIEW adults AS SELECT * FROM users WHERE age >= 21;
SELECT name, age FROM adults;
-- case: view_over_view
CREATE VIEW big AS SELECT order_id, amount FROM orders WHERE amount > 300;
CREATE VIEW bigger AS SELECT order_id, amount * 2 AS a2 FROM big;
SELECT * FROM bigger;
-- case: with_cte
WITH u AS (SELECT user_id, country FROM users WHERE country IS NOT NULL)
SELECT country, COUNT(*) AS n FROM u GROUP BY country;
-- case: with_two_ctes
WITH a AS (SELECT user_id, amount FROM orders), b AS (SELECT user_id, SUM(amount) AS total FROM a GROUP BY user_id)
SELECT user_id, total FROM b WHERE total > 3000;
-- case: subquery_in_from
SELECT t.k, t.c FROM (SELECT product AS k, COUNT(*) AS c FROM orders GROUP BY product) AS t WHERE t.c > 5;
-- case: distinct_single
SELECT DISTINCT currency FROM orders;
-- case: distinct_multi_with_nulls
SELECT DISTINCT user_id, currency FROM orders WHERE user_id IS NULL OR currency IS NULL;
-- case: values_literal
SELECT * FROM (VALUES (1, 'a'), (2, CAST(NULL AS STRING)), (3, 'ü')) AS t(k, v);
-- case: values_mixed_numbers
SELECT k FROM (VALUES (1), (2.5), (-3)) AS t(k);
-- case: set_option_then_query
SET 'table.exec.state.ttl' = '1 h';
SELECT user_id, COUNT(*) AS c FROM orders GROUP BY user_id;
-- case: set_time_zone_ltz
SET 'table.local-time-zone' = 'Asia/Tokyo';
SELECT id, TO_TIMESTAMP_LTZ(1709287200000 + id, 3) AS l FROM events WHERE id <= 3;
-- case: set_time_zone_negative
SET 'table.local-time-zone' = 'America/New_York';
SELECT id, TO_TIMESTAMP_LTZ(1709287200, 0) AS l FROM events WHERE id = 1;
-- case: limit_on_time_order
SELECT order_id, ts FROM orders ORDER BY ts LIMIT 3;
-- case: order_by_time_desc_limit_refused_or_not
SELECT order_id FROM orders ORDER BY order_id LIMIT 2;
-- case: csv_null_literal_quoted_empty
-- with 'csv.null-literal' = '', Flink reads a quoted "" as NULL too
SELECT k, s, s IS NULL AS is_null, CHAR_LENGTH(s) AS len FROM quoted;
-- case: csv_default_empty_string
-- without the option, Flink reads an empty STRING field (quoted or not) as ''
SELECT k, s, s IS NULL AS is_null, CHAR_LENGTH(s) AS len FROM quoted_default;
-- case: json_empty_and_null
SELECT id, kind, kind IS NULL AS is_null, CHAR_LENGTH(kind) AS len FROM events WHERE id <= 8;
-- case: options_hint
-- the hint's option replaces the table's for this query: quoted_default then reads like quoted
SELECT k, s, s IS NULL AS is_null FROM quoted_default /*+ OPTIONS('csv.null-literal' = '') */;
-- case: unknown_column_error
SELECT nope FROM orders;
-- case: unknown_table_error
SELECT * FROM missing_table;
-- case: computed_column_table
CREATE TEMPORARY TABLE o2 (order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3), total AS amount * qty, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT order_id, total FROM o2 WHERE order_id <= 10;
-- case: in_subquery
SELECT order_id FROM orders WHERE user_id IN (SELECT user_id FROM users WHERE country = 'US');
-- case: exists_subquery
SELECT u.name FROM users AS u WHERE EXISTS (SELECT 1 FROM orders AS o WHERE o.user_id = u.user_id AND o.qty > 5);
-- case: scalar_subquery
SELECT order_id, amount FROM orders WHERE amount > (SELECT AVG(amount) FROM orders) AND order_id < 15;
-- case: order_by_desc_limit
SELECT order_id, amount FROM orders ORDER BY amount DESC, order_id LIMIT 3;
-- case: order_by_limit_over_group_result
SELECT user_id, COUNT(*) AS c FROM orders GROUP BY user_id ORDER BY c DESC, user_id LIMIT 2;
-- case: order_by_nulls_first_limit
SELECT order_id, user_id FROM orders ORDER BY user_id NULLS FIRST, order_id DESC LIMIT 4;
