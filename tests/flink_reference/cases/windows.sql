-- Windowing table-valued functions: TUMBLE, HOP, CUMULATE, SESSION and what is built on them.

-- case: tumble_count
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '30' SECOND)) GROUP BY window_start, window_end;
-- case: tumble_by_key_sum_decimal
SELECT window_start, user_id, SUM(amount) AS s, COUNT(qty) AS cq FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, user_id;
-- case: tumble_window_time
SELECT window_end, window_time, MAX(price) AS mp FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '45' SECOND)) GROUP BY window_start, window_end, window_time;
-- case: tumble_named_arguments
SELECT window_start, COUNT(*) AS c FROM TABLE(TUMBLE(DATA => TABLE orders, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: tumble_offset
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '10' SECOND)) GROUP BY window_start, window_end;
-- case: tumble_tvf_rows
SELECT order_id, window_start, window_end FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) WHERE order_id <= 10;
-- case: tumble_avg_min_max
SELECT window_start, AVG(qty) AS a, MIN(product) AS mi, MAX(amount) AS ma FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: tumble_count_distinct_filter
SELECT window_start, COUNT(DISTINCT user_id) AS u, COUNT(*) FILTER (WHERE qty > 1) AS big FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: tumble_having
SELECT window_start, user_id, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, user_id HAVING COUNT(*) >= 3;
-- case: tumble_json_source
SELECT window_start, kind, COUNT(*) AS c, SUM(score) AS s FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '20' SECOND)) GROUP BY window_start, window_end, kind;
-- case: hop_count
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '20' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: hop_by_key
SELECT window_start, currency, SUM(qty) AS s FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '30' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, currency;
-- case: hop_tvf_rows
SELECT order_id, window_start FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '30' SECOND, INTERVAL '1' MINUTE)) WHERE order_id <= 5;
-- case: cumulate_count
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(CUMULATE(TABLE orders, DESCRIPTOR(ts), INTERVAL '20' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
-- case: cumulate_by_key_sum
SELECT window_end, user_id, SUM(amount) AS s FROM TABLE(CUMULATE(TABLE orders, DESCRIPTOR(ts), INTERVAL '30' SECOND, INTERVAL '90' SECOND)) GROUP BY window_start, window_end, user_id;
-- case: session_global
SELECT window_start, window_end, COUNT(*) AS c FROM TABLE(SESSION(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end;
-- case: session_partitioned
SELECT uid, window_start, window_end, COUNT(*) AS c FROM TABLE(SESSION(TABLE events PARTITION BY uid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY uid, window_start, window_end;
-- case: session_orders_by_user
SELECT user_id, window_start, window_end, SUM(qty) AS s FROM TABLE(SESSION(TABLE orders PARTITION BY user_id, DESCRIPTOR(ts), INTERVAL '20' SECOND)) GROUP BY user_id, window_start, window_end;
-- case: cascaded_window_aggregation
CREATE TEMPORARY VIEW per_user AS SELECT window_start, window_end, user_id, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, user_id;
SELECT window_start, window_end, MAX(c) AS top, SUM(c) AS total FROM per_user GROUP BY window_start, window_end;
-- case: window_top_n
SELECT * FROM (SELECT window_start, window_end, order_id, amount, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY amount DESC, order_id) AS rn FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) WHERE rn <= 2;
-- case: window_top_n_after_aggregation
SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY c DESC, user_id) AS rn FROM (SELECT window_start, window_end, user_id, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) WHERE user_id IS NOT NULL GROUP BY window_start, window_end, user_id)) WHERE rn <= 2;
-- case: window_dedup_first
SELECT window_start, order_id, user_id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, user_id ORDER BY ts ASC) AS rn FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) WHERE rn = 1;
-- case: window_dedup_last
SELECT window_start, order_id, user_id FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, user_id ORDER BY ts DESC) AS rn FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) WHERE rn = 1;
-- case: window_join
SELECT o.window_start, o.order_id, p.pay_id FROM (SELECT * FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) AS o JOIN (SELECT * FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) AS p ON o.order_id = p.order_id AND o.window_start = p.window_start AND o.window_end = p.window_end;
-- case: window_aggregation_grouping_sets
SELECT window_start, currency, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, GROUPING SETS ((currency), ());
-- case: window_over_view_with_filter
CREATE TEMPORARY VIEW eur AS SELECT * FROM orders WHERE currency = 'EUR';
SELECT window_start, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE eur, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;
