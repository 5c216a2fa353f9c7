-- Filter and reshape CSV orders into Parquet files (written atomically on commit).
CREATE TABLE orders (
    order_id INT,
    category STRING,
    quantity INT,
    price DOUBLE,
    order_time TIMESTAMP(3)
) WITH (
    'connector' = 'filesystem',
    'path' = 'sql-examples/data/orders.csv',
    'format' = 'csv'
);

CREATE TABLE big_orders (
    order_id INT,
    category STRING,
    revenue DOUBLE,
    order_day STRING
) WITH (
    'connector' = 'filesystem',
    'path' = 'out/big_orders',
    'format' = 'parquet'
);

INSERT INTO big_orders
SELECT order_id, UPPER(category), quantity * price AS revenue, DATE_FORMAT(order_time, 'yyyy-MM-dd')
FROM orders
WHERE quantity * price > 200 AND category <> 'garden';
