-- Aggregates over an updating input (an aggregate of an aggregate, a LEFT JOIN's or a Top-N's changes):
-- Flink's retractable aggregate functions (MIN/MAX and DISTINCT with a count per value, FIRST_VALUE,
-- LAST_VALUE and LISTAGG with retraction, STDDEV/VAR from sums).  The order of values reaching
-- FIRST_VALUE/LAST_VALUE/LISTAGG depends on how updates are batched, so those cases keep one value
-- per group at a time, or measure the list (CHAR_LENGTH).

-- case: max_min_over_counts
SELECT MAX(n) AS mx, MIN(n) AS mn, COUNT(*) AS users FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id);
-- case: max_min_per_count
SELECT n, MAX(user_id) AS mx, MIN(user_id) AS mn FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) GROUP BY n;
-- case: max_min_of_sums_up_and_down
SELECT MAX(s) AS mx, MIN(s) AS mn FROM (SELECT user_id, SUM(qty) AS s FROM orders GROUP BY user_id);
-- case: max_min_strings_per_count
SELECT n, MAX(product) AS mx, MIN(product) AS mn FROM (SELECT product, COUNT(*) AS n FROM orders GROUP BY product) GROUP BY n;
-- case: max_min_decimal_sums
SELECT MAX(total) AS mx, MIN(total) AS mn FROM (SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id);
-- case: max_min_of_max_decimal
SELECT currency, MAX(a) AS mx, MIN(a) AS mn FROM (SELECT currency, user_id, MAX(amount) AS a FROM orders GROUP BY currency, user_id) GROUP BY currency;
-- case: max_min_timestamps
SELECT MAX(last_ts) AS mx, MIN(last_ts) AS mn, MIN(first_ts) AS earliest FROM (SELECT user_id, MAX(ts) AS last_ts, MIN(ts) AS first_ts FROM orders GROUP BY user_id);
-- case: max_min_with_nulls
SELECT MAX(c) AS mx, MIN(c) AS mn, COUNT(DISTINCT c) AS dc, COUNT(c) AS nc FROM (SELECT user_id, MAX(currency) AS c FROM orders GROUP BY user_id);
-- case: count_sum_avg_distinct_over_counts
SELECT COUNT(DISTINCT n) AS dn, SUM(DISTINCT n) AS sn, AVG(DISTINCT n) AS an FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id);
-- case: count_distinct_per_bucket
SELECT n, COUNT(DISTINCT user_id) AS du, COUNT(DISTINCT product) AS dp FROM (SELECT user_id, product, COUNT(*) AS n FROM orders GROUP BY user_id, product) GROUP BY n;
-- case: sum_avg_distinct_decimal
SELECT user_id, SUM(DISTINCT a) AS sa, AVG(DISTINCT a) AS aa, COUNT(DISTINCT a) AS ca FROM (SELECT user_id, product, MAX(amount) AS a FROM orders GROUP BY user_id, product) GROUP BY user_id;
-- case: distinct_doubles
SELECT COUNT(DISTINCT p) AS dp, SUM(DISTINCT p) AS sp, MAX(p) AS mp FROM (SELECT currency, MAX(price) AS p FROM orders GROUP BY currency);
-- case: sum_distinct_of_sums_up_and_down
SELECT SUM(DISTINCT s) AS ss, AVG(DISTINCT s) AS av, COUNT(DISTINCT s) AS cs FROM (SELECT product, SUM(qty) AS s FROM orders GROUP BY product);
-- case: left_join_max_min_paid
SELECT o.user_id, MAX(p.paid) AS mx, MIN(p.paid) AS mn, COUNT(DISTINCT p.pay_id) AS np FROM orders AS o LEFT JOIN payments AS p ON o.order_id = p.order_id GROUP BY o.user_id;
-- case: left_join_users_orders
SELECT u.country, MAX(o.amount) AS mx, MIN(o.product) AS mp, COUNT(DISTINCT o.product) AS dp FROM users AS u LEFT JOIN orders AS o ON u.user_id = o.user_id GROUP BY u.country;
-- case: left_join_global
SELECT MAX(u.age) AS mx, MIN(u.name) AS mn, COUNT(DISTINCT u.country) AS dc FROM orders AS o LEFT JOIN users AS u ON o.user_id = u.user_id;
-- case: topn_min_max_per_user
SELECT user_id, MIN(amount) AS mn, MAX(amount) AS mx, COUNT(DISTINCT product) AS dp FROM (SELECT * FROM (SELECT order_id, user_id, product, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY amount DESC) AS rn FROM orders WHERE amount IS NOT NULL) WHERE rn <= 3) GROUP BY user_id;
-- case: topn_global_min_max
SELECT MIN(price) AS mn, MAX(price) AS mx, SUM(DISTINCT qty) AS sq, MIN(product) AS mp FROM (SELECT * FROM (SELECT order_id, product, price, qty, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn FROM orders WHERE price IS NOT NULL) WHERE rn <= 5);
-- case: first_last_value_regrouped
SELECT user_id, FIRST_VALUE(n) AS fv, LAST_VALUE(n) AS lv, LISTAGG(CAST(n AS STRING)) AS la FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) GROUP BY user_id;
-- case: first_last_value_over_dedup
SELECT user_id, FIRST_VALUE(product) AS fp, LAST_VALUE(amount) AS la, MAX(amount) AS mx FROM (SELECT * FROM (SELECT order_id, user_id, product, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY amount DESC) AS rn FROM orders WHERE amount IS NOT NULL) WHERE rn = 1) GROUP BY user_id;
-- case: listagg_length_per_count
SELECT n, CHAR_LENGTH(LISTAGG(CAST(user_id AS STRING), ';')) AS len, COUNT(*) AS c FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) GROUP BY n;
-- case: stddev_over_counts
SELECT STDDEV_POP(n) AS sp, STDDEV_SAMP(n) AS ss, VAR_POP(n) AS vp, VAR_SAMP(n) AS vs FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id);
-- case: stddev_double_of_sums
SELECT STDDEV_POP(CAST(s AS DOUBLE)) AS sp, VAR_SAMP(CAST(s AS DOUBLE)) AS vs FROM (SELECT user_id, SUM(qty) AS s FROM orders GROUP BY user_id);
-- case: stddev_decimal_of_sums
SELECT VAR_SAMP(total) AS vs, STDDEV_POP(total) AS sp FROM (SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id);
-- case: having_count_distinct
SELECT n, MAX(user_id) AS mx FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) GROUP BY n HAVING COUNT(DISTINCT user_id) > 1;
-- case: max_min_booleans
SELECT n, MAX(f) AS mx, MIN(f) AS mn FROM (SELECT uid, COUNT(*) AS n, MAX(flag) AS f FROM events GROUP BY uid) GROUP BY n;
-- case: min_max_of_left_join_nulls
SELECT MIN(n) AS mn, MAX(n) AS mx, COUNT(DISTINCT n) AS dn FROM (SELECT u.user_id, COUNT(o.order_id) AS n FROM users AS u LEFT JOIN orders AS o ON o.user_id = u.user_id GROUP BY u.user_id);
