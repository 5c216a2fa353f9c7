-- Joins: regular (inner/outer, NULL keys), interval, temporal (event time) and window joins.

-- case: inner_join
SELECT o.order_id, u.name FROM orders AS o JOIN users AS u ON o.user_id = u.user_id;
-- case: inner_join_duplicate_keys
SELECT u.name, o.order_id FROM users AS u JOIN orders AS o ON u.user_id = o.user_id WHERE u.user_id = 2;
-- case: left_join
SELECT o.order_id, o.user_id, u.name FROM orders AS o LEFT JOIN users AS u ON o.user_id = u.user_id;
-- case: right_join
SELECT o.order_id, u.user_id, u.name FROM orders AS o RIGHT JOIN users AS u ON o.user_id = u.user_id;
-- case: full_join
SELECT o.order_id, o.user_id, u.user_id AS uid, u.name FROM orders AS o FULL OUTER JOIN users AS u ON o.user_id = u.user_id;
-- case: full_join_aggregates
SELECT a.user_id, a.c, b.country FROM (SELECT user_id, COUNT(*) AS c FROM orders GROUP BY user_id) AS a FULL JOIN users AS b ON a.user_id = b.user_id;
-- case: join_using
SELECT user_id, name, order_id FROM orders JOIN users USING (user_id) WHERE order_id <= 20;
-- case: comma_join_where
SELECT o.order_id, u.country FROM orders AS o, users AS u WHERE o.user_id = u.user_id AND u.age > 30;
-- case: join_with_extra_condition
SELECT o.order_id, u.name FROM orders AS o JOIN users AS u ON o.user_id = u.user_id AND o.qty > u.age / 10;
-- case: left_join_with_extra_condition
SELECT o.order_id, u.name FROM orders AS o LEFT JOIN users AS u ON o.user_id = u.user_id AND u.country = 'US';
-- case: join_two_keys
SELECT a.order_id, b.order_id AS other FROM orders AS a JOIN orders AS b ON a.user_id = b.user_id AND a.currency = b.currency AND a.order_id < b.order_id WHERE a.user_id = 1;
-- case: self_join_null_keys_never_match
SELECT a.order_id, b.order_id AS other FROM orders AS a JOIN orders AS b ON a.currency = b.currency WHERE a.currency IS NULL;
-- case: join_expression_key
SELECT o.order_id, u.name FROM orders AS o JOIN users AS u ON o.user_id + 1 = u.user_id;
-- case: join_string_key_unicode
SELECT a.order_id, b.order_id AS other FROM orders AS a JOIN orders AS b ON a.product = b.product WHERE a.product = '香蕉' AND a.order_id < b.order_id;
-- case: join_then_aggregate
SELECT u.country, COUNT(*) AS c, SUM(o.amount) AS s FROM orders AS o JOIN users AS u ON o.user_id = u.user_id GROUP BY u.country;
-- case: left_join_then_aggregate
SELECT u.name, COUNT(o.order_id) AS c FROM users AS u LEFT JOIN orders AS o ON u.user_id = o.user_id GROUP BY u.name;
-- case: three_way_join
SELECT o.order_id, u.name, p.pay_id FROM orders AS o JOIN users AS u ON o.user_id = u.user_id JOIN payments AS p ON p.order_id = o.order_id;
-- case: join_aggregated_sides
SELECT a.user_id, a.n, b.paid FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) AS a JOIN (SELECT o.user_id, SUM(p.paid) AS paid FROM payments AS p JOIN orders AS o ON p.order_id = o.order_id GROUP BY o.user_id) AS b ON a.user_id = b.user_id;
-- case: interval_join
SELECT o.order_id, p.pay_id FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' MINUTE;
-- case: interval_join_before
SELECT o.order_id, p.pay_id FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id AND o.ts BETWEEN p.ts - INTERVAL '30' SECOND AND p.ts;
-- case: interval_join_left_outer
SELECT o.order_id, p.pay_id FROM orders AS o LEFT JOIN payments AS p ON o.order_id = p.order_id AND p.ts BETWEEN o.ts - INTERVAL '10' SECOND AND o.ts + INTERVAL '30' SECOND;
-- case: interval_join_strict_bounds
SELECT o.order_id, p.pay_id FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id AND p.ts > o.ts AND p.ts < o.ts + INTERVAL '2' MINUTE;
-- case: interval_join_no_equi_key
SELECT COUNT(*) AS c FROM (SELECT o.order_id FROM orders AS o JOIN payments AS p ON p.ts BETWEEN o.ts AND o.ts + INTERVAL '2' SECOND);
-- case: temporal_join_event_time
SELECT o.order_id, o.currency, r.rate FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;
-- case: temporal_join_left
SELECT o.order_id, o.currency, r.rate FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;
-- case: temporal_join_computed
SELECT o.order_id, o.amount * r.rate AS converted FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency WHERE o.order_id <= 20;
-- case: window_join_left
SELECT o.window_start, o.order_id, p.pay_id FROM (SELECT * FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) AS o LEFT JOIN (SELECT * FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) AS p ON o.order_id = p.order_id AND o.window_start = p.window_start AND o.window_end = p.window_end;
-- case: window_join_aggregates
SELECT a.window_start, a.c, b.s FROM (SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end) AS a JOIN (SELECT window_start, window_end, SUM(paid) AS s FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end) AS b ON a.window_start = b.window_start AND a.window_end = b.window_end;
-- case: cross_join_small
SELECT u.name, n.id FROM users AS u CROSS JOIN nums AS n WHERE n.id <= 2 AND u.user_id = 1;
-- case: correlated_scalar_subquery_count_and_max
SELECT u.user_id, (SELECT COUNT(*) FROM orders AS o WHERE o.user_id = u.user_id) AS n, (SELECT MAX(o.amount) FROM orders AS o WHERE o.user_id = u.user_id AND o.qty > 2) AS m FROM users AS u;
-- case: correlated_scalar_subquery_in_where
SELECT o.order_id FROM orders AS o WHERE o.amount > (SELECT AVG(o2.amount) FROM orders AS o2 WHERE o2.user_id = o.user_id);
-- case: correlated_scalar_subquery_expression_over_aggregates
SELECT u.user_id, (SELECT COUNT(*) * 10 + COALESCE(SUM(p.paid), 0) FROM payments AS p WHERE p.order_id = u.user_id) AS x FROM users AS u;
