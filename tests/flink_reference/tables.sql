-- The tables every case can read, created before each case on Flink and on sqlstream alike.
-- {data} is replaced by the absolute path of tests/flink_reference/data.
CREATE TABLE orders (
  order_id INT, user_id INT, product STRING, amount DECIMAL(10, 2), qty INT, price DOUBLE,
  currency STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{data}/orders.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE users (
  user_id INT, name STRING, country STRING, age INT
) WITH ('connector' = 'filesystem', 'path' = '{data}/users.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE payments (
  pay_id INT, order_id INT, paid DECIMAL(10, 2), ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{data}/payments.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE rates (
  currency STRING, rate DECIMAL(10, 4), ts TIMESTAMP(3),
  PRIMARY KEY (currency) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{data}/rates.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE events (
  id BIGINT, uid INT, kind STRING, score DOUBLE, flag BOOLEAN, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{data}/events.json', 'format' = 'json');
CREATE TABLE nums (
  id INT, i INT, b BIGINT, d DOUBLE, m DECIMAL(12, 3), s STRING
) WITH ('connector' = 'filesystem', 'path' = '{data}/nums.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE strs (
  id INT, s STRING, n INT
) WITH ('connector' = 'filesystem', 'path' = '{data}/strs.json', 'format' = 'json');
CREATE TABLE docs (
  id INT, doc STRING, path STRING, k STRING
) WITH ('connector' = 'filesystem', 'path' = '{data}/docs.json', 'format' = 'json');
CREATE TABLE nested_docs (
  id INT, tags ARRAY<STRING>, nums ARRAY<INT>, attrs MAP<STRING, INT>,
  info ROW<name STRING, age INT, addr ROW<city STRING, zip STRING>>,
  items ARRAY<ROW<sku STRING, qty INT>>
) WITH ('connector' = 'filesystem', 'path' = '{data}/nested_docs.json', 'format' = 'json');
CREATE TABLE bags (
  id INT, tags ARRAY<STRING>, r ROW<a INT, b STRING>, n ARRAY<INT>
) WITH ('connector' = 'filesystem', 'path' = '{data}/bags.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE quoted (
  k INT, s STRING
) WITH ('connector' = 'filesystem', 'path' = '{data}/quoted.csv', 'format' = 'csv', 'csv.null-literal' = '');
CREATE TABLE quoted_default (
  k INT, s STRING
) WITH ('connector' = 'filesystem', 'path' = '{data}/quoted.csv', 'format' = 'csv');
CREATE TABLE ticks (
  sym STRING, price INT, tax INT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{data}/ticks.csv', 'format' = 'csv', 'csv.null-literal' = '');
