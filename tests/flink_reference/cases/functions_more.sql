-- PRINTF (java.util.Formatter over Flink's internal values: a mismatch gives NULL), ENCODE/DECODE,
-- ARRAY_AGG(DISTINCT | IGNORE NULLS), PERCENTILE, over NULLs and edges.

-- case: encode_charsets
SELECT id, ENCODE(s, 'UTF-8') AS u8, ENCODE(s, 'US-ASCII') AS ascii, ENCODE(s, 'ISO-8859-1') AS latin, ENCODE(s, 'UTF-16') AS u16, ENCODE(s, 'utf8') AS alias FROM strs;
-- case: decode_round_trip
SELECT id, DECODE(ENCODE(s, 'UTF-8'), 'UTF-8') AS a, DECODE(ENCODE(s, 'UTF-16LE'), 'UTF-16LE') AS b, DECODE(ENCODE(s, 'UTF-16'), 'UTF-16') AS c FROM strs;
-- case: decode_malformed
SELECT id, DECODE(ENCODE(s, 'ISO-8859-1'), 'UTF-8') AS a, DECODE(ENCODE(s, 'UTF-8'), 'US-ASCII') AS b, DECODE(ENCODE(s, 'UTF-16BE'), 'UTF-16') AS c FROM strs;
-- case: encode_unknown_charset
SELECT id, ENCODE(s, 'no-such-charset') AS x FROM strs;
-- case: printf_strings
SELECT id, PRINTF('[%s|%10s|%-10s|%.3s|%S]', s, s, s, s, s) AS x FROM strs;
-- case: printf_integers
SELECT id, PRINTF('%d|%5d|%-5d|%05d|%+d|% d|%,d|%(d|%x|%X|%o|%#x|%08X', i, i, i, i, i, i, i, i, i, i, i, i, i) AS x, PRINTF('%d %x %,d', b, b, b) AS y FROM nums;
-- case: printf_doubles
SELECT id, PRINTF('%f|%.2f|%10.3f|%-10.1f|%e|%.3E|%g|%+.1f|%(.2f|%,.2f|%010.2f', d, d, d, d, d, d, d, d, d, d, d) AS x FROM nums;
-- case: printf_rounding_half_up
SELECT PRINTF('%.1f %.1f %.0f %.0f %.2e %.3g', CAST(0.05 AS DOUBLE), CAST(0.15 AS DOUBLE), CAST(2.5 AS DOUBLE), CAST(-0.5 AS DOUBLE), CAST(1.125 AS DOUBLE), CAST(0.00012345 AS DOUBLE)) AS x;
-- case: printf_general_of_every_type
SELECT id, PRINTF('%s %s %s %s %s %s %b %b', i, b, d, m, CAST(i AS SMALLINT), i > 0, i, CAST(NULL AS INT)) AS x FROM nums;
-- case: printf_mismatch_is_null
SELECT id, PRINTF('%d', d) AS a, PRINTF('%f', i) AS b, PRINTF('%f', m) AS c, PRINTF('%c', s) AS e, PRINTF('%d', s) AS f FROM nums;
-- case: printf_null_arguments
SELECT id, PRINTF('%s/%d/%5s/%b', CAST(NULL AS STRING), n, CAST(NULL AS INT), n) AS x, PRINTF(CASE WHEN id = 1 THEN CAST(NULL AS STRING) ELSE '%s' END, s) AS y FROM strs;
-- case: printf_bad_formats
SELECT PRINTF('%s %s', 'a') AS missing, PRINTF('%q', 1) AS unknown_conversion, PRINTF('%-s', 'a') AS no_width, PRINTF('%+s', 'a') AS bad_flag, PRINTF('%.2d', 1) AS bad_precision, PRINTF('%', 1) AS dangling, PRINTF('no args') AS plain_text;
-- case: printf_indexes_and_specials
SELECT PRINTF('%2$s %1$s %<s %% %n|%c%c', 'a', 'b', 65, 128512) AS x;
-- case: printf_temporal
SELECT PRINTF('%s|%s|%s|%d', DATE '2024-01-02', TIMESTAMP '2024-01-02 03:04:05.123', TIMESTAMP '2024-01-02 03:04:00', DATE '1970-01-05') AS x;
-- case: array_agg_distinct
SELECT product, ARRAY_AGG(DISTINCT user_id) AS users, ARRAY_AGG(DISTINCT currency) AS currencies FROM orders WHERE order_id <= 20 GROUP BY product;
-- case: array_agg_ignore_nulls
SELECT product, ARRAY_AGG(user_id IGNORE NULLS) AS a, ARRAY_AGG(user_id RESPECT NULLS) AS b, ARRAY_AGG(DISTINCT currency IGNORE NULLS) AS c FROM orders WHERE order_id <= 20 GROUP BY product;
-- case: array_agg_distinct_retracting
SELECT c, ARRAY_SORT(ARRAY_AGG(DISTINCT n)) AS ns FROM (SELECT product, COUNT(*) AS c, MAX(qty) AS n FROM orders GROUP BY product) GROUP BY c;
-- case: array_agg_distinct_window
SELECT window_start, ARRAY_AGG(DISTINCT user_id) AS users FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) WHERE order_id <= 12 GROUP BY window_start, window_end;
-- case: array_agg_ignore_nulls_window
SELECT window_start, ARRAY_AGG(currency IGNORE NULLS) AS cs FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) WHERE order_id <= 12 GROUP BY window_start, window_end;
-- case: array_agg_filter
SELECT product, ARRAY_AGG(user_id) FILTER (WHERE qty > 2) AS a FROM orders WHERE order_id <= 20 GROUP BY product;
-- case: array_agg_filter_ignore_nulls
SELECT product, ARRAY_AGG(user_id IGNORE NULLS) FILTER (WHERE qty > 2) AS a FROM orders WHERE order_id <= 20 GROUP BY product;
-- case: percentile_single_and_array
SELECT product, PERCENTILE(qty, 0.5) AS med, PERCENTILE(price, 0.25) AS p25, PERCENTILE(amount, 1.0) AS top, PERCENTILE(qty, ARRAY[0.0, 0.3, 0.9]) AS ps FROM orders GROUP BY product;
-- case: percentile_frequency
SELECT product, PERCENTILE(price, 0.5, qty) AS med, PERCENTILE(price, 0.5, user_id - 3) AS shifted FROM orders GROUP BY product;
-- case: percentile_nulls_and_extremes
SELECT PERCENTILE(i, 0.5) AS a, PERCENTILE(b, 0.75) AS b, PERCENTILE(d, 0.1) AS c, PERCENTILE(m, 0.6) AS m FROM nums;
-- case: percentile_retracting
SELECT c, PERCENTILE(n, 0.5) AS med FROM (SELECT product, COUNT(*) AS c, SUM(qty) AS n FROM orders GROUP BY product) GROUP BY c;
-- case: percentile_window
SELECT window_start, PERCENTILE(price, 0.5) AS med, PERCENTILE(qty, ARRAY[0.5, 1.0]) AS qs FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: percentile_hop_window
SELECT window_start, PERCENTILE(price, 0.5) AS med FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '30' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: percentile_out_of_range
SELECT PERCENTILE(qty, 1.5) AS x FROM orders;
-- case: percentile_of_a_string
SELECT PERCENTILE(product, 0.5) AS x FROM orders;
-- case: collect_multiset
SELECT product, COLLECT(currency) AS cs, COLLECT(qty) AS qs, COLLECT(DISTINCT qty) AS dq FROM orders GROUP BY product;
-- case: collect_cast_to_string
SELECT product, user_id, CAST(COLLECT(user_id) AS STRING) AS us FROM orders WHERE order_id <= 20 GROUP BY product, user_id;
-- case: collect_only_nulls
SELECT COLLECT(n) AS ns FROM strs WHERE n IS NULL;
-- case: collect_retracting
SELECT c, COLLECT(n) AS ns FROM (SELECT product, COUNT(*) AS c, MAX(qty) AS n FROM orders GROUP BY product) GROUP BY c;
-- case: collect_window
SELECT window_start, COLLECT(currency) AS cs FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: collect_session_window
SELECT window_start, COLLECT(qty) AS qs FROM TABLE(SESSION(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;
-- case: collect_cardinality_fails
SELECT CARDINALITY(COLLECT(qty)) AS n FROM orders;
-- case: over_listagg_array_agg_rows
SELECT order_id, LISTAGG(product) OVER w AS l, ARRAY_AGG(qty) OVER w AS a, ARRAY_AGG(currency IGNORE NULLS) OVER w AS c FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW);
-- case: over_statistics_range
SELECT order_id, STDDEV_POP(qty) OVER w AS sp, VAR_SAMP(price) OVER w AS vs, STDDEV_SAMP(amount) OVER w AS ss FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW);
-- case: over_percentile_collect_unbounded
SELECT order_id, PERCENTILE(price, 0.5) OVER w AS med, COLLECT(qty) OVER w AS qs, LISTAGG(currency, '|') OVER w AS cs FROM orders WINDOW w AS (PARTITION BY product ORDER BY ts);
-- case: over_percentile_rows_unbounded
SELECT order_id, PERCENTILE(qty, ARRAY[0.25, 0.75]) OVER w AS ps, ARRAY_AGG(qty) OVER w AS qs FROM orders WINDOW w AS (PARTITION BY currency ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
-- case: over_var_pop_integer
SELECT order_id, VAR_POP(qty) OVER w AS vp FROM orders WINDOW w AS (PARTITION BY currency ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
-- case: over_statistics_range_exact_types
SELECT order_id, STDDEV_POP(qty) OVER w AS sp, VAR_SAMP(qty) OVER w AS vs, STDDEV_SAMP(amount) OVER w AS ss, VAR_POP(amount) OVER w AS vp FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW);
-- case: over_statistics_unbounded_double
SELECT order_id, VAR_SAMP(price) OVER w AS vs, STDDEV_POP(price) OVER w AS sp, STDDEV_SAMP(qty) OVER w AS sq, VAR_POP(CAST(qty AS DOUBLE)) OVER w AS vd FROM orders WINDOW w AS (PARTITION BY currency ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
-- case: over_statistics_rows_bounded_with_sum
SELECT order_id, SUM(qty) OVER w AS s, VAR_POP(qty * 2) OVER w AS v, STDDEV_SAMP(CAST(qty AS BIGINT)) OVER w AS sb, VAR_SAMP(CAST(qty AS SMALLINT)) OVER w AS vt FROM orders WINDOW w AS (PARTITION BY product ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW);
-- case: over_statistics_range_unbounded_nulls
SELECT order_id, VAR_POP(NULLIF(qty, qty)) OVER w AS vn, STDDEV_SAMP(amount) OVER w AS ss, VAR_POP(price) OVER w AS vp FROM orders WINDOW w AS (PARTITION BY user_id ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
