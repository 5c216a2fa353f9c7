-- Unwindowed GROUP BY (an updating result, compared after the changelog is applied).

-- case: count_star_and_column
SELECT user_id, COUNT(*) AS c, COUNT(qty) AS cq, COUNT(price) AS cp FROM orders GROUP BY user_id;
-- case: global_count
SELECT COUNT(*) AS c, COUNT(user_id) AS cu FROM orders;
-- case: global_aggregate_empty_input
SELECT COUNT(*) AS c, SUM(qty) AS s FROM orders WHERE order_id < 0;
-- case: sum_types
SELECT user_id, SUM(qty) AS si, SUM(price) AS sd, SUM(amount) AS sm FROM orders GROUP BY user_id;
-- case: sum_int_overflow
SELECT SUM(i) AS s FROM nums WHERE id IN (4, 2);
-- case: sum_bigint_overflow
SELECT SUM(b) AS s FROM nums WHERE id IN (4, 2);
-- case: avg_types
SELECT user_id, AVG(qty) AS ai, AVG(price) AS ad, AVG(amount) AS am FROM orders GROUP BY user_id;
-- case: avg_int_truncates_negative
SELECT AVG(i) AS a FROM nums WHERE id IN (3, 8);
-- case: min_max_numbers
SELECT currency, MIN(qty) AS mi, MAX(qty) AS ma, MIN(amount) AS mia, MAX(price) AS map FROM orders GROUP BY currency;
-- case: min_max_strings_unicode
SELECT user_id, MIN(product) AS mi, MAX(product) AS ma FROM orders GROUP BY user_id;
-- case: min_max_timestamp
SELECT user_id, MIN(ts) AS first_ts, MAX(ts) AS last_ts FROM orders GROUP BY user_id;
-- case: min_max_boolean
SELECT uid, MIN(flag) AS mi, MAX(flag) AS ma FROM events GROUP BY uid;
-- case: all_null_group
SELECT product, SUM(CASE WHEN qty > 100 THEN qty END) AS s, MAX(CAST(NULL AS INT)) AS m FROM orders GROUP BY product;
-- case: count_distinct
SELECT user_id, COUNT(DISTINCT product) AS p, COUNT(DISTINCT currency) AS c FROM orders GROUP BY user_id;
-- case: sum_distinct
SELECT currency, SUM(DISTINCT qty) AS s, COUNT(DISTINCT qty) AS c FROM orders GROUP BY currency;
-- case: avg_distinct
SELECT currency, AVG(DISTINCT qty) AS a FROM orders GROUP BY currency;
-- case: filter_clause
SELECT user_id, COUNT(*) FILTER (WHERE qty > 1) AS big, SUM(amount) FILTER (WHERE currency = 'EUR') AS eur FROM orders GROUP BY user_id;
-- case: filter_clause_distinct
SELECT currency, COUNT(DISTINCT user_id) FILTER (WHERE qty > 0) AS u FROM orders GROUP BY currency;
-- case: having
SELECT user_id, COUNT(*) AS c FROM orders GROUP BY user_id HAVING COUNT(*) > 6;
-- case: having_on_aggregate_not_selected
SELECT product FROM orders GROUP BY product HAVING SUM(qty) > 10;
-- case: group_by_expression
SELECT qty > 2 AS big, COUNT(*) AS c FROM orders GROUP BY qty > 2;
-- case: group_by_two_keys_nulls
SELECT user_id, currency, COUNT(*) AS c FROM orders GROUP BY user_id, currency;
-- case: group_by_string_empty_and_null
SELECT kind, COUNT(*) AS c, SUM(score) AS s FROM events GROUP BY kind;
-- case: aggregate_of_expression
SELECT user_id, SUM(qty * price) AS revenue, MAX(ABS(qty)) AS m FROM orders GROUP BY user_id;
-- case: aggregate_then_filter_view
CREATE TEMPORARY VIEW per_user AS SELECT user_id, COUNT(*) AS c FROM orders GROUP BY user_id;
SELECT c, COUNT(*) AS users FROM per_user GROUP BY c;
-- case: sum_decimal_then_cast
SELECT user_id, CAST(SUM(amount) AS DOUBLE) AS s FROM orders GROUP BY user_id;
-- case: count_distinct_global
SELECT COUNT(DISTINCT user_id) AS u, COUNT(DISTINCT product) AS p FROM orders;
-- case: distinct_then_count
SELECT COUNT(*) AS n FROM (SELECT DISTINCT user_id, product FROM orders);
-- case: stddev_var
SELECT user_id, STDDEV_POP(price) AS sp, VAR_SAMP(price) AS vs FROM orders GROUP BY user_id;
-- case: listagg
SELECT user_id, LISTAGG(currency) AS l FROM orders WHERE order_id <= 3 GROUP BY user_id;
