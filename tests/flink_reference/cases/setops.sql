-- Set operations over NULLs and duplicates: UNION [ALL], INTERSECT [ALL], EXCEPT [ALL].

-- case: union_all
SELECT user_id FROM users UNION ALL SELECT user_id FROM orders WHERE order_id <= 5;
-- case: union_distinct
SELECT user_id FROM users UNION SELECT user_id FROM orders;
-- case: union_all_type_widening
SELECT i AS v FROM nums WHERE id <= 3 UNION ALL SELECT d FROM nums WHERE id IN (7, 8);
-- case: union_decimal_int
SELECT m AS v FROM nums WHERE id IN (2, 3) UNION ALL SELECT i FROM nums WHERE id = 7;
-- case: union_strings_null
SELECT country AS c FROM users UNION SELECT currency FROM orders;
-- case: intersect
SELECT user_id FROM users INTERSECT SELECT user_id FROM orders;
-- case: intersect_all
SELECT currency FROM orders WHERE user_id = 1 INTERSECT ALL SELECT currency FROM orders WHERE user_id = 4;
-- case: except
SELECT user_id FROM users EXCEPT SELECT user_id FROM orders;
-- case: except_all
SELECT currency FROM orders WHERE user_id = 4 EXCEPT ALL SELECT currency FROM orders WHERE user_id = 1;
-- case: except_null_matches_null
SELECT user_id FROM orders EXCEPT SELECT user_id FROM users;
-- case: intersect_two_columns
SELECT user_id, country FROM users INTERSECT SELECT user_id, 'US' FROM orders;
-- case: union_three_way
SELECT 'a' AS s FROM users WHERE user_id = 1 UNION ALL SELECT kind FROM events WHERE id <= 3 UNION ALL SELECT product FROM orders WHERE order_id = 1;
-- case: union_then_aggregate
SELECT k, COUNT(*) AS c FROM (SELECT user_id AS k FROM users UNION ALL SELECT user_id FROM orders) GROUP BY k;
-- case: precedence_intersect_over_union
SELECT user_id FROM users UNION SELECT user_id FROM orders INTERSECT SELECT 9;
-- case: except_all_duplicates
SELECT qty FROM orders EXCEPT ALL SELECT qty FROM orders WHERE user_id = 4;
