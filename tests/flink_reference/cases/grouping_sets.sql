-- GROUPING SETS, ROLLUP and CUBE (NULL keys in the data and NULLs of rolled-up columns).

-- case: grouping_sets_basic
SELECT user_id, currency, COUNT(*) AS c FROM orders GROUP BY GROUPING SETS ((user_id), (currency));
-- case: grouping_sets_with_empty
SELECT user_id, COUNT(*) AS c FROM orders GROUP BY GROUPING SETS ((user_id), ());
-- case: rollup
SELECT currency, user_id, SUM(qty) AS s FROM orders GROUP BY ROLLUP (currency, user_id);
-- case: cube
SELECT currency, product, COUNT(*) AS c FROM orders WHERE user_id = 4 GROUP BY CUBE (currency, product);
-- case: grouping_function
SELECT currency, GROUPING(currency) AS g, COUNT(*) AS c FROM orders GROUP BY ROLLUP (currency);
-- case: grouping_id
SELECT currency, user_id, GROUPING_ID(currency, user_id) AS g, COUNT(*) AS c FROM orders GROUP BY CUBE (currency, user_id);
-- case: rollup_having
SELECT currency, COUNT(*) AS c FROM orders GROUP BY ROLLUP (currency) HAVING COUNT(*) > 9;
-- case: grouping_sets_filter
SELECT currency, COUNT(*) FILTER (WHERE qty > 0) AS c FROM orders GROUP BY GROUPING SETS ((currency), ());
-- case: rollup_avg_decimal
SELECT currency, AVG(amount) AS a FROM orders GROUP BY ROLLUP (currency);
-- case: cube_distinct
SELECT currency, COUNT(DISTINCT user_id) AS u FROM orders GROUP BY CUBE (currency);
