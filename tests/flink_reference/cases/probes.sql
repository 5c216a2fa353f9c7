-- Ordinary queries as a new user writes them, mixing clauses and functions (a sweep for answers
-- that differ from Flink's).

-- case: probe_revenue_per_currency_having
SELECT currency, COUNT(*) AS n, SUM(amount) AS total, AVG(price) AS avg_price FROM orders GROUP BY currency HAVING COUNT(*) > 2;
-- case: probe_case_buckets
SELECT CASE WHEN amount < 100 THEN 'small' WHEN amount < 500 THEN 'medium' ELSE 'large' END AS bucket, COUNT(*) AS n FROM orders GROUP BY CASE WHEN amount < 100 THEN 'small' WHEN amount < 500 THEN 'medium' ELSE 'large' END;
-- case: probe_coalesce_mixed_types
SELECT order_id, COALESCE(user_id, -1) AS u, COALESCE(currency, 'n/a') AS c, COALESCE(amount, 0) AS a FROM orders WHERE order_id <= 8;
-- case: probe_concat_numbers
SELECT order_id, CONCAT(product, '-', CAST(qty AS STRING)) AS k, product || '/' || currency AS p FROM orders WHERE order_id <= 8;
-- case: probe_date_format_patterns
SELECT order_id, DATE_FORMAT(ts, 'yyyy/MM/dd HH:mm:ss.SSS') AS a, DATE_FORMAT(ts, 'EEE, d MMM yyyy') AS b, DATE_FORMAT(ts, 'hh:mm a') AS c FROM orders WHERE order_id <= 3;
-- case: probe_timestampdiff_units
SELECT order_id, TIMESTAMPDIFF(SECOND, TIMESTAMP '2024-03-01 10:00:00', ts) AS s, TIMESTAMPDIFF(MINUTE, TIMESTAMP '2024-03-01 09:00:00', ts) AS m, TIMESTAMPDIFF(DAY, ts, TIMESTAMP '2024-02-01 00:00:00') AS d FROM orders WHERE order_id <= 4;
-- case: probe_mod_and_division_signs
SELECT id, MOD(i, 3) AS m3, MOD(i, -3) AS mn, i / 2 AS h, b / 3 AS b3, d / 2 AS dd, m / 4 AS md FROM nums;
-- case: probe_power_sqrt_log
SELECT id, POWER(i, 2) AS p, SQRT(ABS(d)) AS s, LN(ABS(d) + 1) AS l, LOG10(ABS(d) + 1) AS l10, EXP(0.5) AS e FROM nums WHERE id <= 5;
-- case: probe_string_functions_mix
SELECT id, UPPER(s) AS u, LOWER(s) AS l, INITCAP(s) AS ic, TRIM(BOTH ' ' FROM s) AS t, REPLACE(s, 'o', '0') AS r, POSITION('o' IN s) AS pos, CHAR_LENGTH(s) AS n FROM strs;
-- case: probe_regexp_functions
SELECT id, REGEXP_REPLACE(s, '[aeiou]', '*') AS r, REGEXP_EXTRACT(s, '([A-Za-z]+)', 1) AS e, REGEXP(s, '^[A-Z]') AS m FROM strs;
-- case: probe_split_index_and_substr
SELECT id, SPLIT_INDEX(s, ' ', 0) AS a, SPLIT_INDEX(s, ' ', 1) AS b, SUBSTR(s, 2, 3) AS c, LEFT(s, 2) AS l, RIGHT(s, 2) AS r FROM strs;
-- case: probe_count_distinct_and_filter
SELECT user_id, COUNT(DISTINCT product) AS np, COUNT(*) FILTER (WHERE qty > 2) AS big, SUM(qty) FILTER (WHERE currency = 'EUR') AS eur FROM orders GROUP BY user_id;
-- case: probe_min_max_strings_and_booleans
SELECT uid, MIN(kind) AS mn, MAX(kind) AS mx, MIN(ts) AS first_ts, MAX(score) AS best FROM events GROUP BY uid;
-- case: probe_avg_of_int_and_double
SELECT user_id, AVG(qty) AS aq, AVG(CAST(qty AS DOUBLE)) AS aqd, AVG(price) AS ap FROM orders GROUP BY user_id;
-- case: probe_nested_aggregation_subquery
SELECT n, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) GROUP BY n;
-- case: probe_join_then_aggregate
SELECT u.country, COUNT(o.order_id) AS n, SUM(o.amount) AS s FROM orders AS o JOIN users AS u ON o.user_id = u.user_id GROUP BY u.country;
-- case: probe_left_join_null_fill
SELECT u.user_id, u.name, COALESCE(SUM(o.qty), 0) AS q FROM users AS u LEFT JOIN orders AS o ON o.user_id = u.user_id GROUP BY u.user_id, u.name;
-- case: probe_tumble_with_filter_and_having
SELECT window_start, currency, SUM(amount) AS s FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '30' SECOND)) WHERE qty > 1 GROUP BY window_start, window_end, currency HAVING SUM(amount) > 100;
-- case: probe_hop_count
SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '20' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: probe_cumulate_sum
SELECT window_start, window_end, SUM(qty) AS q FROM TABLE(CUMULATE(TABLE orders, DESCRIPTOR(ts), INTERVAL '20' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: probe_tumble_offset
SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '15' SECOND)) GROUP BY window_start, window_end;
-- case: probe_session_partitioned
SELECT window_start, window_end, user_id, COUNT(*) AS n FROM TABLE(SESSION(TABLE orders PARTITION BY user_id, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, user_id;
-- case: probe_window_time_cascade
SELECT window_start, SUM(n) AS total FROM TABLE(TUMBLE(TABLE (SELECT window_time AS wt, n FROM (SELECT window_start, window_end, window_time, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, window_time)), DESCRIPTOR(wt), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: probe_distinct_and_union
SELECT DISTINCT currency FROM orders UNION SELECT country FROM users;
-- case: probe_in_list_and_between
SELECT order_id FROM orders WHERE product IN ('cherry', 'Äpfel', 'kiwi') AND amount BETWEEN 100 AND 600;
-- case: probe_like_patterns
SELECT product, product LIKE '%err%' AS a, product LIKE '_pfel' AS b, product LIKE 'c%' AS c FROM orders WHERE order_id <= 10;
-- case: probe_boolean_logic_nulls
SELECT id, flag, NOT flag AS nf, flag AND score > 0 AS a, flag OR score > 0 AS o, flag IS TRUE AS t, flag IS NOT FALSE AS nf2 FROM events WHERE id <= 8;
-- case: probe_cast_double_to_string_formats
SELECT id, CAST(d AS STRING) AS s, CAST(d * 1000000 AS STRING) AS big, CAST(d / 1000 AS STRING) AS small FROM nums;
-- case: probe_decimal_arithmetic_mix
SELECT id, m * 2 AS a, m + i AS b, m * d AS c, m / 3 AS e, -m AS f FROM nums;
-- case: probe_if_and_nullif
SELECT id, IF(i > 0, 'pos', 'non-pos') AS sign, NULLIF(i, 0) AS nz, IFNULL(s, 'none') AS s2 FROM nums;
-- case: probe_greatest_least
SELECT id, GREATEST(i, 2) AS g, LEAST(d, 1.5) AS l FROM nums;
-- case: probe_extract_parts_of_timestamp
SELECT order_id, EXTRACT(YEAR FROM ts) AS y, EXTRACT(MONTH FROM ts) AS mo, EXTRACT(DOW FROM ts) AS dow, EXTRACT(WEEK FROM ts) AS w, EXTRACT(MILLISECOND FROM ts) AS ms FROM orders WHERE order_id <= 3;
-- case: probe_date_arithmetic
SELECT order_id, CAST(ts AS DATE) + INTERVAL '1' DAY AS tomorrow, ts - INTERVAL '90' MINUTE AS earlier, DATE '2024-02-28' + INTERVAL '2' DAY AS leap FROM orders WHERE order_id <= 2;
-- case: probe_top3_per_currency
SELECT currency, order_id, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY amount DESC) AS rn FROM orders) WHERE rn <= 3;
-- case: probe_dedup_latest_per_user
SELECT user_id, order_id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM orders) WHERE rn = 1;
-- case: probe_interval_join_window
SELECT o.order_id, p.pay_id FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' MINUTE;
-- case: probe_values_and_cast
SELECT a, b, a * b AS c FROM (VALUES (1, 2.5), (3, -1.25), (CAST(NULL AS INT), 4.0)) AS t(a, b);
-- case: probe_values_bare_null
SELECT a, b FROM (VALUES (1, 2.5), (NULL, 4.0)) AS t(a, b);
-- case: probe_max_over_updating_counts
SELECT MAX(n) AS mx, MIN(n) AS mn, SUM(n) AS s FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id);
-- case: probe_count_distinct_over_updating
SELECT n, COUNT(DISTINCT user_id) AS users FROM (SELECT user_id, product, COUNT(*) AS n FROM orders GROUP BY user_id, product) GROUP BY n;
-- case: probe_listagg_over_updating
SELECT c, CHAR_LENGTH(LISTAGG(product)) AS len FROM (SELECT product, COUNT(*) AS c FROM orders GROUP BY product) GROUP BY c;
-- case: probe_left_join_of_aggregates
SELECT u.user_id, a.n, a.s FROM users AS u LEFT JOIN (SELECT user_id, COUNT(*) AS n, SUM(qty) AS s FROM orders GROUP BY user_id) AS a ON u.user_id = a.user_id;
-- case: probe_full_join_with_filter
SELECT o.order_id, p.pay_id FROM (SELECT * FROM orders WHERE qty >= 3) AS o FULL JOIN (SELECT * FROM payments WHERE paid > 100) AS p ON o.order_id = p.order_id;
-- case: probe_topn_over_aggregate_with_rank_number
SELECT product, n, rn FROM (SELECT product, n, ROW_NUMBER() OVER (ORDER BY n DESC, product) AS rn FROM (SELECT product, COUNT(*) AS n FROM orders GROUP BY product)) WHERE rn <= 3;
-- case: probe_window_topn
SELECT window_start, product, s FROM (SELECT window_start, window_end, product, SUM(amount) AS s, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY SUM(amount) DESC) AS rn FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, product) WHERE rn <= 2;
-- case: probe_window_dedup_first
SELECT window_start, user_id, order_id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, user_id ORDER BY ts) AS rn FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) WHERE rn = 1;
-- case: probe_grouping_sets_totals
SELECT currency, product, SUM(qty) AS q FROM orders GROUP BY GROUPING SETS ((currency), (product), ());
-- case: probe_rollup_counts
SELECT user_id, currency, COUNT(*) AS n FROM orders GROUP BY ROLLUP (user_id, currency);
-- case: probe_distinct_aggregate_window
SELECT window_start, COUNT(DISTINCT user_id) AS u, COUNT(*) AS n FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '30' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: probe_over_sum_range_and_rows
SELECT order_id, SUM(qty) OVER (PARTITION BY user_id ORDER BY ts RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW) AS s, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW) AS c FROM orders;
-- case: probe_union_all_then_group
SELECT k, COUNT(*) AS n FROM (SELECT currency AS k FROM orders UNION ALL SELECT country AS k FROM users) GROUP BY k;
-- case: probe_exists_and_not_in
SELECT u.user_id FROM users AS u WHERE EXISTS (SELECT 1 FROM orders AS o WHERE o.user_id = u.user_id AND o.qty > 3) AND u.user_id NOT IN (SELECT user_id FROM orders WHERE currency = 'JPY' AND user_id IS NOT NULL);
-- case: probe_having_with_aggregate_expression
SELECT product, SUM(amount) / COUNT(*) AS avg_amt, MAX(qty) - MIN(qty) AS spread FROM orders GROUP BY product HAVING MAX(qty) - MIN(qty) > 1;
-- case: probe_case_with_null_and_else
SELECT order_id, CASE currency WHEN 'EUR' THEN 1 WHEN 'USD' THEN 2 END AS c, CASE WHEN currency IS NULL THEN 'none' ELSE currency END AS d FROM orders WHERE order_id <= 10;
-- case: probe_topn_over_group_by_in_one_block
SELECT * FROM (SELECT product, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC, product) AS rn FROM orders GROUP BY product) WHERE rn <= 2;
-- case: probe_window_topn_having_in_one_block
SELECT * FROM (SELECT window_start, window_end, user_id, SUM(qty) AS q, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY SUM(qty) DESC, user_id) AS rn FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) WHERE user_id IS NOT NULL GROUP BY window_start, window_end, user_id HAVING COUNT(*) > 1) WHERE rn <= 1;
