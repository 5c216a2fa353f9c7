-- Changelog formats (debezium-json, canal-json, maxwell-json) on the filesystem connector: the same
-- inventory changes (data/changes_*.json) read as updating tables, queried, and written back as events.

-- case: debezium_rows
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT * FROM inv;
-- case: debezium_group_by
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT product, COUNT(*) AS n, SUM(qty) AS qty, SUM(price) AS price FROM inv GROUP BY product;
-- case: debezium_global_aggregate
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT COUNT(*) AS n, COUNT(qty) AS with_qty, SUM(qty) AS qty, AVG(qty) AS avg_qty FROM inv;
-- case: debezium_filter_project
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT id, UPPER(product) AS p, qty * 2 AS q2 FROM inv WHERE qty > 2;
-- case: debezium_join
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT i.id, i.product, u.name FROM inv i JOIN users u ON i.id = u.user_id;
-- case: debezium_aggregate_of_aggregate
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT n, COUNT(*) AS products FROM (SELECT product, COUNT(*) AS n FROM inv GROUP BY product) GROUP BY n;
-- case: debezium_unknown_op_fails
CREATE TEMPORARY TABLE bad (id INT, product STRING) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_bad_op.json', 'format' = 'debezium-json');
SELECT * FROM bad;
-- case: debezium_ignore_parse_errors
CREATE TEMPORARY TABLE bad (id INT, product STRING) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_bad_op.json', 'format' = 'debezium-json', 'debezium-json.ignore-parse-errors' = 'true');
SELECT * FROM bad;
-- case: canal_rows
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_canal.json', 'format' = 'canal-json');
SELECT * FROM inv;
-- case: canal_table_include
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_canal.json', 'format' = 'canal-json', 'canal-json.table.include' = 'inv.*', 'canal-json.database.include' = 'shop');
SELECT * FROM inv;
-- case: canal_group_by
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_canal.json', 'format' = 'canal-json', 'canal-json.table.include' = 'inventory');
SELECT product, COUNT(*) AS n, SUM(qty) AS qty FROM inv GROUP BY product;
-- case: maxwell_rows
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_maxwell.json', 'format' = 'maxwell-json');
SELECT * FROM inv;
-- case: maxwell_group_by
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_maxwell.json', 'format' = 'maxwell-json');
SELECT product, COUNT(*) AS n, SUM(price) AS price FROM inv GROUP BY product;
-- case: debezium_sink_round_trip
CREATE TEMPORARY TABLE sink (product STRING, n BIGINT, qty INT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'debezium-json');
INSERT INTO sink SELECT product, COUNT(*), SUM(qty) FROM orders GROUP BY product;
SELECT * FROM sink;
-- case: canal_sink_round_trip
CREATE TEMPORARY TABLE sink (currency STRING, total DECIMAL(38, 2)) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'canal-json');
INSERT INTO sink SELECT currency, SUM(amount) FROM orders GROUP BY currency;
SELECT * FROM sink;
-- case: maxwell_sink_round_trip
CREATE TEMPORARY TABLE sink (user_id INT, n BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'maxwell-json');
INSERT INTO sink SELECT user_id, COUNT(*) FROM orders GROUP BY user_id;
SELECT user_id, n FROM sink;
-- case: changelog_source_into_changelog_sink
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
CREATE TEMPORARY TABLE sink (id INT, product STRING, qty INT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'maxwell-json');
INSERT INTO sink SELECT id, product, qty FROM inv;
SELECT * FROM sink;
-- case: plain_json_sink_refuses_updates
CREATE TEMPORARY TABLE sink (product STRING, n BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp}/sink', 'format' = 'json');
INSERT INTO sink SELECT product, COUNT(*) FROM orders GROUP BY product;
SELECT * FROM sink;
-- case: debezium_versioned_table_temporal_join
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT o.order_id, i.product, i.qty FROM orders o JOIN inv FOR SYSTEM_TIME AS OF o.ts AS i ON o.order_id = i.id;
-- case: debezium_versioned_table_left_temporal_join
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT o.order_id, i.product, i.qty FROM orders o LEFT JOIN inv FOR SYSTEM_TIME AS OF o.ts AS i ON o.order_id = i.id WHERE o.order_id <= 8;
-- case: debezium_interval_join_fails
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT o.order_id, i.id FROM orders o JOIN inv i ON o.order_id = i.id AND o.ts BETWEEN i.ts - INTERVAL '1' HOUR AND i.ts;
-- case: debezium_over_fails
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT id, SUM(qty) OVER (PARTITION BY product ORDER BY ts) AS s FROM inv;
-- case: debezium_deduplicate
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT id, product, qty FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY product ORDER BY ts) AS rn FROM inv) WHERE rn = 1;
-- case: debezium_top2
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT id, qty FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY qty DESC) AS rn FROM inv) WHERE rn <= 2;
-- case: debezium_min_max
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT product, MAX(qty) AS max_qty, MIN(price) AS min_price, MAX(ts) AS last_ts FROM inv GROUP BY product;
-- case: debezium_tumble_window
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT window_start, COUNT(*) AS n, SUM(qty) AS qty FROM TABLE(TUMBLE(TABLE inv, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end;
-- case: min_max_of_an_aggregate
SELECT MAX(n) AS top, MIN(n) AS bottom, MAX(product) AS last_product FROM (SELECT product, COUNT(*) AS n FROM orders GROUP BY product);
-- case: canal_min_max_retracting
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_canal.json', 'format' = 'canal-json', 'canal-json.table.include' = 'inventory');
SELECT MIN(qty) AS min_qty, MAX(qty) AS max_qty, MIN(product) AS first_product, MAX(ts) AS last_ts FROM inv;
-- case: debezium_tumble_emptied_windows
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT window_start, window_end, COUNT(*) AS n, MAX(qty) AS max_qty, MIN(product) AS first_product FROM TABLE(TUMBLE(TABLE inv, DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY window_start, window_end;
-- case: debezium_hop_window
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT window_start, window_end, COUNT(*) AS n, SUM(price) AS price, AVG(qty) AS avg_qty FROM TABLE(HOP(TABLE inv, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '4' SECOND)) GROUP BY window_start, window_end;
-- case: debezium_cumulate_window_by_product
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT window_start, window_end, product, COUNT(*) AS n, SUM(qty) AS qty FROM TABLE(CUMULATE(TABLE inv, DESCRIPTOR(ts), INTERVAL '3' SECOND, INTERVAL '6' SECOND)) GROUP BY window_start, window_end, product;
-- case: debezium_window_top_n
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT window_start, id, qty FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY qty DESC) AS rn FROM TABLE(TUMBLE(TABLE inv, DESCRIPTOR(ts), INTERVAL '5' SECOND))) WHERE rn <= 1;
-- case: debezium_session_window
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE inv, DESCRIPTOR(ts), INTERVAL '2' SECOND)) GROUP BY window_start, window_end;
-- case: debezium_changelog_left_temporal_join
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), cur AS CASE WHEN id <= 3 THEN 'EUR' ELSE 'USD' END, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT i.id, i.product, r.rate FROM inv i LEFT JOIN rates FOR SYSTEM_TIME AS OF i.ts AS r ON r.currency = i.cur;
-- case: two_changelog_sources_join
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
CREATE TEMPORARY TABLE mx (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_maxwell.json', 'format' = 'maxwell-json');
SELECT a.id, a.qty, b.product FROM inv a LEFT JOIN mx b ON a.id = b.id + 1;
-- case: debezium_distinct_aggregates
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
SELECT COUNT(DISTINCT product) AS products, SUM(DISTINCT qty) AS qtys, AVG(DISTINCT price) AS avg_price, COUNT(DISTINCT qty) AS n_qty FROM inv;
-- case: canal_distinct_by_group
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_canal.json', 'format' = 'canal-json', 'canal-json.table.include' = 'inventory');
SELECT product, COUNT(DISTINCT qty) AS n_qty, SUM(DISTINCT price) AS prices FROM inv GROUP BY product;
