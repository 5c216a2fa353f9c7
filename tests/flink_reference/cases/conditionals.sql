-- CASE, COALESCE, NULLIF, IF, GREATEST, LEAST over NULLs.

-- case: case_searched
SELECT order_id, CASE WHEN qty > 3 THEN 'many' WHEN qty > 0 THEN 'some' ELSE 'none' END AS k FROM orders;
-- case: case_searched_no_else
SELECT order_id, CASE WHEN qty > 3 THEN 'many' END AS k FROM orders;
-- case: case_simple
SELECT order_id, CASE currency WHEN 'EUR' THEN 1 WHEN 'USD' THEN 2 ELSE 0 END AS c FROM orders;
-- case: case_simple_null_operand
SELECT order_id, CASE user_id WHEN NULL THEN 'null' ELSE 'other' END AS c FROM orders WHERE order_id <= 6;
-- case: case_mixed_numeric_types
SELECT order_id, CASE WHEN qty > 2 THEN amount ELSE qty END AS v FROM orders;
-- case: case_mixed_int_double
SELECT order_id, CASE WHEN qty > 2 THEN price ELSE qty END AS v FROM orders;
-- case: case_in_aggregate
SELECT user_id, SUM(CASE WHEN currency = 'EUR' THEN 1 ELSE 0 END) AS eur FROM orders GROUP BY user_id;
-- case: coalesce_two
SELECT order_id, COALESCE(currency, 'n/a') AS c FROM orders;
-- case: coalesce_three_numeric
SELECT order_id, COALESCE(qty, user_id, -1) AS c FROM orders;
-- case: coalesce_all_null
SELECT id, COALESCE(CAST(NULL AS INT), CAST(NULL AS INT)) AS c FROM nums WHERE id = 1;
-- case: coalesce_decimal_int
SELECT order_id, COALESCE(amount, 0) AS a FROM orders;
-- case: nullif
SELECT order_id, NULLIF(qty, 0) AS q FROM orders;
-- case: nullif_strings
SELECT id, NULLIF(kind, '') AS k FROM events;
-- case: if_function
SELECT order_id, IF(qty > 2, 'big', 'small') AS s FROM orders;
-- case: if_null_condition
SELECT order_id, IF(price > 50, price, -1.0) AS p FROM orders;
-- case: ifnull
SELECT order_id, IFNULL(user_id, 0) AS u FROM orders;
-- case: greatest_least
SELECT id, GREATEST(i, 5) AS g, LEAST(i, 5) AS l FROM nums;
-- case: greatest_with_null
SELECT order_id, GREATEST(qty, user_id) AS g FROM orders WHERE order_id <= 10;
-- case: greatest_strings
SELECT user_id, GREATEST(name, country) AS g FROM users;
-- case: nested_case_coalesce
SELECT order_id, COALESCE(CASE WHEN qty < 0 THEN NULL ELSE qty END, 0) * 2 AS q FROM orders;
