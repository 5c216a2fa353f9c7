-- Arithmetic and its result types: integer division, overflow, DECIMAL precision and scale.

-- case: int_add_sub_mul
SELECT id, i + 1 AS a, i - 1 AS s, i * 2 AS m FROM nums WHERE id <> 4 AND id <> 5;
-- case: int_division_truncates
SELECT id, i / 2 AS q, i / -2 AS nq FROM nums WHERE i IS NOT NULL;
-- case: int_division_by_zero_error
SELECT id, i / 0 AS q FROM nums WHERE id = 2;
-- case: double_division_by_zero
SELECT id, d / 0 AS q FROM nums WHERE id IN (1, 2, 3);
-- case: int_overflow_wraps
SELECT id, i + 1 AS a, i * 2 AS m FROM nums WHERE id IN (4, 5);
-- case: bigint_overflow_wraps
SELECT id, b + 1 AS a, b - 1 AS s FROM nums WHERE id IN (4, 5);
-- case: int_plus_bigint_type
SELECT id, i + b AS s FROM nums WHERE id IN (1, 2, 3, 7);
-- case: int_times_double
SELECT id, i * d AS p FROM nums WHERE id IN (1, 2, 3, 7);
-- case: unary_minus
SELECT id, -i AS n, -d AS nd, -m AS nm FROM nums;
-- case: modulo_operator
SELECT id, i % 3 AS r FROM nums WHERE i IS NOT NULL;
-- case: mod_function_negative
SELECT id, MOD(i, -3) AS r, MOD(-7, 3) AS c FROM nums WHERE i IS NOT NULL;
-- case: decimal_add
SELECT order_id, amount + amount AS a FROM orders WHERE order_id <= 8;
-- case: decimal_times_int
SELECT order_id, amount * qty AS t FROM orders WHERE order_id <= 12;
-- case: decimal_times_decimal
SELECT id, m * m AS sq FROM nums;
-- case: decimal_division
SELECT order_id, amount / 3 AS third FROM orders WHERE order_id <= 8;
-- case: decimal_div_decimal
SELECT id, m / CAST(7.000 AS DECIMAL(4, 3)) AS q FROM nums;
-- case: decimal_plus_double
SELECT order_id, amount + price AS s FROM orders WHERE order_id <= 8;
-- case: decimal_literal_arithmetic
SELECT id, 0.1 + 0.2 AS a, 1.5 * 2 AS b, 10 / 4.0 AS c FROM nums WHERE id = 1;
-- case: int_literal_division
SELECT id, 7 / 2 AS a, -7 / 2 AS b, 7.0 / 2 AS c FROM nums WHERE id = 1;
-- case: double_special_values
SELECT id, d * 1e10 AS big, d / 1e300 AS small FROM nums WHERE id IN (4, 5, 9);
-- case: arithmetic_with_nulls
SELECT order_id, qty + user_id AS s, price * qty AS p FROM orders WHERE order_id <= 14;
-- case: decimal_precision_overflow
SELECT id, m * CAST(1000000000000 AS DECIMAL(13, 0)) AS big FROM nums WHERE id IN (2, 4);
-- case: decimal_sum_scale
SELECT order_id, amount - 0.005 AS a FROM orders WHERE order_id <= 5;
-- case: smallint_tinyint_arithmetic
SELECT id, CAST(i AS SMALLINT) + CAST(1 AS TINYINT) AS s FROM nums WHERE id IN (1, 2, 3, 7);
-- case: null_divided_by_zero
SELECT id, NULLIF(i, i) / 0 AS q, NULLIF(m, m) / 0 AS d, NULLIF(b, b) / 0 AS r FROM nums WHERE id < 4;
-- case: mod_is_typed_as_the_divisor
SELECT id, MOD(b, 7) AS bi, MOD(i, CAST(5 AS BIGINT)) AS ib, b % CAST(3 AS TINYINT) AS bt, MOD(b, CAST(NULL AS INT)) AS n FROM nums WHERE id IN (1, 2, 3, 4, 5);
