-- WHERE predicates with NULLs in their operands: three-valued logic.

-- case: where_gt
SELECT order_id, qty FROM orders WHERE qty > 2;
-- case: where_null_comparison_drops
SELECT order_id FROM orders WHERE qty = NULL;
-- case: where_is_null
SELECT order_id FROM orders WHERE qty IS NULL OR amount IS NULL;
-- case: where_is_not_null_and
SELECT order_id FROM orders WHERE user_id IS NOT NULL AND product IS NOT NULL AND qty < 1;
-- case: where_or_with_null
SELECT order_id FROM orders WHERE qty > 5 OR price < 0;
-- case: where_not_with_null
SELECT order_id, qty FROM orders WHERE NOT (qty > 1);
-- case: like_prefix
SELECT DISTINCT product FROM orders WHERE product LIKE 'a%';
-- case: like_underscore
SELECT DISTINCT product FROM orders WHERE product LIKE '_pfel' OR product LIKE 'd_te%';
-- case: like_unicode
SELECT DISTINCT product FROM orders WHERE product LIKE '%蕉';
-- case: not_like
SELECT DISTINCT product FROM orders WHERE product NOT LIKE '%e%';
-- case: not_like_null
SELECT id, s NOT LIKE '%a%' AS r FROM strs;
-- case: like_escape
SELECT id, s FROM strs WHERE s LIKE '!%!_%' ESCAPE '!';
-- case: like_case_sensitive
SELECT id, s LIKE 'abc%' AS lower_match, s LIKE 'ABC%' AS upper_match FROM strs WHERE id = 13;
-- case: in_list
SELECT order_id, currency FROM orders WHERE currency IN ('EUR', 'JPY');
-- case: not_in_list
SELECT order_id, currency FROM orders WHERE currency NOT IN ('EUR', 'JPY');
-- case: in_list_with_null_element
SELECT order_id FROM orders WHERE qty IN (1, NULL);
-- case: not_in_list_with_null_element
SELECT order_id FROM orders WHERE qty NOT IN (1, CAST(NULL AS INT));
-- case: between
SELECT order_id, price FROM orders WHERE price BETWEEN 10 AND 50;
-- case: not_between
SELECT order_id, qty FROM orders WHERE qty NOT BETWEEN 0 AND 3;
-- case: between_symmetric
SELECT order_id, qty FROM orders WHERE qty BETWEEN SYMMETRIC 5 AND 2;
-- case: is_distinct_from
SELECT order_id, user_id FROM orders WHERE user_id IS DISTINCT FROM 4;
-- case: is_not_distinct_from_null
SELECT order_id FROM orders WHERE user_id IS NOT DISTINCT FROM CAST(NULL AS INT);
-- case: is_true_false_unknown
SELECT id, flag IS TRUE AS t, flag IS FALSE AS f, flag IS UNKNOWN AS u, flag IS NOT TRUE AS nt FROM events WHERE id <= 10;
-- case: boolean_column_filter
SELECT id FROM events WHERE flag;
-- case: boolean_and_or_null_values
SELECT id, flag AND id > 5 AS a, flag OR id > 5 AS o FROM events WHERE id <= 12;
-- case: where_string_compare
SELECT name FROM users WHERE name > 'B';
-- case: where_decimal_compare
SELECT order_id, amount FROM orders WHERE amount < 0;
-- case: where_expression_on_both_sides
SELECT order_id FROM orders WHERE qty * 100 > amount;
-- case: where_false
SELECT order_id FROM orders WHERE 1 = 0;
-- case: similar_to
SELECT id, s FROM strs WHERE s SIMILAR TO '[0-9]+';
