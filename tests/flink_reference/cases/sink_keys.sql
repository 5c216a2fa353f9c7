-- Upsert sinks (a PRIMARY KEY, no -U rows): Flink 2.3 refuses an updating query whose upsert key is not within
-- the sink's key unless ON CONFLICT is given (table.exec.sink.require-on-conflict, FLIP-558). The sinks are
-- blackholes; an accepted INSERT is followed by a query that shows it ran.

-- case: group_key_is_the_primary_key
CREATE TEMPORARY TABLE sink (product STRING, n BIGINT, PRIMARY KEY (product) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT product, COUNT(*) FROM orders WHERE product IS NOT NULL GROUP BY product;
SELECT COUNT(*) AS n FROM users;
-- case: group_key_within_the_primary_key
CREATE TEMPORARY TABLE sink (product STRING, currency STRING, n BIGINT, PRIMARY KEY (product, currency) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT product, MAX(currency), COUNT(*) FROM orders WHERE product IS NOT NULL AND currency IS NOT NULL GROUP BY product;
SELECT COUNT(*) AS n FROM users;
-- case: group_key_is_not_the_primary_key
CREATE TEMPORARY TABLE sink (product STRING, n BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT product, COUNT(*) FROM orders GROUP BY product;
SELECT COUNT(*) AS n FROM users;
-- case: group_key_projected_away
CREATE TEMPORARY TABLE sink (currency STRING, n BIGINT, PRIMARY KEY (currency) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT MAX(currency), COUNT(*) FROM orders GROUP BY product;
SELECT COUNT(*) AS n FROM users;
-- case: top_n_with_its_rank_number
CREATE TEMPORARY TABLE sink (product STRING, order_id INT, rn BIGINT, PRIMARY KEY (product, rn) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT product, order_id, rn FROM (SELECT product, order_id, ROW_NUMBER() OVER (PARTITION BY product ORDER BY qty DESC) AS rn FROM orders WHERE product IS NOT NULL) WHERE rn <= 2;
SELECT COUNT(*) AS n FROM users;
-- case: top_n_without_its_rank_number
CREATE TEMPORARY TABLE sink (product STRING, order_id INT, PRIMARY KEY (product) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT product, order_id FROM (SELECT product, order_id, ROW_NUMBER() OVER (PARTITION BY product ORDER BY qty DESC) AS rn FROM orders) WHERE rn <= 2;
SELECT COUNT(*) AS n FROM users;
-- case: union_of_aggregates
CREATE TEMPORARY TABLE sink (user_id INT, n BIGINT, PRIMARY KEY (user_id) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT user_id, COUNT(*) FROM orders GROUP BY user_id UNION ALL SELECT user_id, COUNT(*) FROM users GROUP BY user_id;
SELECT COUNT(*) AS n FROM users;
-- case: aggregate_joined_with_a_keyless_table
CREATE TEMPORARY TABLE sink (user_id INT, n BIGINT, name STRING, PRIMARY KEY (user_id) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT a.user_id, a.n, u.name FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) a JOIN users u ON a.user_id = u.user_id;
SELECT COUNT(*) AS n FROM users;
-- case: join_of_aggregates_on_their_keys
CREATE TEMPORARY TABLE sink (user_id INT, n BIGINT, m BIGINT, PRIMARY KEY (user_id) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT a.user_id, a.n, b.m FROM (SELECT user_id, COUNT(*) AS n FROM orders GROUP BY user_id) a JOIN (SELECT user_id, COUNT(*) AS m FROM users GROUP BY user_id) b ON a.user_id = b.user_id;
SELECT COUNT(*) AS n FROM users;
-- case: changelog_source_without_key
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
CREATE TEMPORARY TABLE sink (id INT, product STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT id, product FROM inv;
SELECT COUNT(*) AS n FROM users;
-- case: changelog_source_keyed_as_the_sink
CREATE TEMPORARY TABLE inv (id INT, product STRING, qty INT, price DECIMAL(10, 2), ts TIMESTAMP(3), PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'filesystem', 'path' = '{data}/changes_debezium.json', 'format' = 'debezium-json');
CREATE TEMPORARY TABLE sink (id INT, product STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT id, product FROM inv;
SELECT COUNT(*) AS n FROM users;
-- case: upsert_materialize_none_writes_as_changes_arrive
SET 'table.exec.sink.upsert-materialize' = 'NONE';
CREATE TEMPORARY TABLE sink (product STRING, n BIGINT, PRIMARY KEY (n) NOT ENFORCED) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT product, COUNT(*) FROM orders GROUP BY product;
SELECT COUNT(*) AS n FROM users;
-- case: keyed_shuffle_value_refused
SET 'table.exec.sink.keyed-shuffle' = 'SOMETIMES';
SELECT COUNT(*) AS n FROM users;
