-- Top-N and deduplication with ROW_NUMBER (updating results), RANK and DENSE_RANK.

-- case: top2_per_user
SELECT * FROM (SELECT order_id, user_id, amount, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY amount DESC) AS rn FROM orders WHERE amount IS NOT NULL) WHERE rn <= 2;
-- case: top3_global
SELECT * FROM (SELECT order_id, price, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn FROM orders WHERE price IS NOT NULL) WHERE rn <= 3;
-- case: bottom2_ascending
SELECT * FROM (SELECT order_id, currency, qty, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY qty ASC, order_id ASC) AS rn FROM orders WHERE qty IS NOT NULL) WHERE rn <= 2;
-- case: topn_without_rank_column
SELECT order_id, user_id FROM (SELECT order_id, user_id, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY order_id DESC) AS rn FROM orders) WHERE rn <= 1;
-- case: topn_rank_ties
SELECT * FROM (SELECT order_id, qty, RANK() OVER (PARTITION BY currency ORDER BY qty DESC) AS r FROM orders WHERE qty IS NOT NULL AND currency = 'EUR') WHERE r <= 2;
-- case: topn_dense_rank
SELECT * FROM (SELECT order_id, qty, DENSE_RANK() OVER (PARTITION BY currency ORDER BY qty DESC) AS r FROM orders WHERE qty IS NOT NULL AND currency = 'USD') WHERE r <= 2;
-- case: topn_over_aggregate
SELECT * FROM (SELECT product, c, ROW_NUMBER() OVER (ORDER BY c DESC, product) AS rn FROM (SELECT product, COUNT(*) AS c FROM orders WHERE product IS NOT NULL GROUP BY product)) WHERE rn <= 2;
-- case: topn_rn_between
SELECT * FROM (SELECT order_id, amount, ROW_NUMBER() OVER (ORDER BY amount DESC) AS rn FROM orders WHERE amount IS NOT NULL) WHERE rn > 1 AND rn <= 3;
-- case: dedup_keep_first
SELECT order_id, user_id, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts ASC) AS rn FROM orders) WHERE rn = 1;
-- case: dedup_keep_last
SELECT order_id, user_id, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM orders) WHERE rn = 1;
-- case: dedup_keep_last_by_string_key
SELECT id, kind FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY kind ORDER BY ts DESC) AS rn FROM events) WHERE rn = 1;
-- case: dedup_two_keys
SELECT order_id, user_id, currency FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id, currency ORDER BY ts ASC) AS rn FROM orders) WHERE rn = 1;
-- case: topn_by_decimal_desc_with_nulls
SELECT * FROM (SELECT order_id, amount, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY amount ASC, order_id) AS rn FROM orders) WHERE rn <= 2;
