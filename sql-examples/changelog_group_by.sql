-- A non-windowed GROUP BY is a continuously updated result: the print sink shows
-- the changelog (+I inserts, -U/+U updates) as each category's totals change.
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

CREATE TABLE category_totals (
    category STRING,
    orders BIGINT,
    items BIGINT
) WITH ('connector' = 'print', 'print-identifier' = 'totals');

SET 'table.exec.batch-size' = '100';

INSERT INTO category_totals
SELECT category, COUNT(*) AS orders, SUM(quantity) AS items
FROM orders
WHERE quantity > 0
GROUP BY category;
