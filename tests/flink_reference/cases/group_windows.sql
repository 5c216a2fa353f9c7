-- Legacy group windows: GROUP BY TUMBLE/HOP/SESSION(ts, ...) with their auxiliary functions.

-- case: group_tumble
SELECT TUMBLE_START(ts, INTERVAL '30' SECOND) AS ws, TUMBLE_END(ts, INTERVAL '30' SECOND) AS we, COUNT(*) AS c FROM orders GROUP BY TUMBLE(ts, INTERVAL '30' SECOND);
-- case: group_tumble_by_key
SELECT user_id, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, SUM(qty) AS s FROM orders GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE);
-- case: group_tumble_rowtime
SELECT TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE) AS rt, COUNT(*) AS c FROM orders GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);
-- case: group_tumble_rowtime_cascade
CREATE TEMPORARY VIEW w1 AS SELECT TUMBLE_ROWTIME(ts, INTERVAL '30' SECOND) AS rt, COUNT(*) AS c FROM orders GROUP BY TUMBLE(ts, INTERVAL '30' SECOND);
SELECT TUMBLE_START(rt, INTERVAL '1' MINUTE) AS ws, SUM(c) AS c FROM w1 GROUP BY TUMBLE(rt, INTERVAL '1' MINUTE);
-- case: group_hop
SELECT HOP_START(ts, INTERVAL '30' SECOND, INTERVAL '1' MINUTE) AS ws, HOP_END(ts, INTERVAL '30' SECOND, INTERVAL '1' MINUTE) AS we, COUNT(*) AS c FROM orders GROUP BY HOP(ts, INTERVAL '30' SECOND, INTERVAL '1' MINUTE);
-- case: group_hop_by_key
SELECT currency, HOP_END(ts, INTERVAL '20' SECOND, INTERVAL '40' SECOND) AS we, MAX(amount) AS m FROM orders GROUP BY currency, HOP(ts, INTERVAL '20' SECOND, INTERVAL '40' SECOND);
-- case: group_session
SELECT uid, SESSION_START(ts, INTERVAL '10' SECOND) AS ss, SESSION_END(ts, INTERVAL '10' SECOND) AS se, COUNT(*) AS c FROM events GROUP BY uid, SESSION(ts, INTERVAL '10' SECOND);
-- case: group_session_rowtime
SELECT SESSION_ROWTIME(ts, INTERVAL '5' SECOND) AS rt, COUNT(*) AS c FROM events GROUP BY SESSION(ts, INTERVAL '5' SECOND);
-- case: group_tumble_having
SELECT user_id, TUMBLE_END(ts, INTERVAL '1' MINUTE) AS we, COUNT(*) AS c FROM orders GROUP BY user_id, TUMBLE(ts, INTERVAL '1' MINUTE) HAVING SUM(qty) > 5;
-- case: group_tumble_distinct
SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, COUNT(DISTINCT currency) AS c, AVG(price) AS a FROM orders GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);
-- case: group_tumble_payments
SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, SUM(paid) AS s, COUNT(order_id) AS c FROM payments GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);
