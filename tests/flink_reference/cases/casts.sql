-- CAST and TRY_CAST between numeric, string, boolean, decimal and temporal types.

-- case: cast_int_to_string
SELECT id, CAST(i AS STRING) AS s FROM nums;
-- case: cast_double_to_string
SELECT id, CAST(d AS STRING) AS s FROM nums;
-- case: cast_decimal_to_string
SELECT id, CAST(m AS STRING) AS s FROM nums;
-- case: cast_boolean_to_string
SELECT id, CAST(flag AS STRING) AS s FROM events WHERE id <= 6;
-- case: cast_timestamp_to_string
SELECT id, CAST(ts AS STRING) AS s FROM events WHERE id <= 4;
-- case: cast_date_to_string
SELECT id, CAST(CAST(ts AS DATE) AS STRING) AS s FROM events WHERE id <= 2;
-- case: cast_string_to_int_valid
SELECT id, CAST(s AS INT) AS v FROM strs WHERE id IN (8, 10);
-- case: cast_string_to_int_invalid_error
SELECT id, CAST(s AS INT) AS v FROM strs WHERE id = 1;
-- case: try_cast_string_to_int
SELECT id, TRY_CAST(s AS INT) AS v FROM strs;
-- case: try_cast_string_to_double
SELECT id, TRY_CAST(s AS DOUBLE) AS v FROM strs;
-- case: try_cast_string_to_decimal
SELECT id, TRY_CAST(s AS DECIMAL(10, 2)) AS v FROM strs;
-- case: try_cast_string_to_date
SELECT id, TRY_CAST(s AS DATE) AS v FROM strs;
-- case: try_cast_string_to_timestamp
SELECT id, TRY_CAST(s AS TIMESTAMP(3)) AS v FROM strs;
-- case: try_cast_string_to_boolean
SELECT id, TRY_CAST(s AS BOOLEAN) AS v FROM strs;
-- case: cast_string_with_spaces_to_int
SELECT id, TRY_CAST(s AS INT) AS v FROM nums;
-- case: cast_double_to_int_truncates
SELECT id, CAST(d AS INT) AS v FROM nums WHERE id IN (1, 2, 3, 7, 8, 9);
-- case: cast_double_to_bigint_out_of_range
SELECT id, CAST(d AS BIGINT) AS v FROM nums WHERE id = 4;
-- case: cast_bigint_to_int_overflow
SELECT id, CAST(b AS INT) AS v FROM nums WHERE id IN (4, 5, 9);
-- case: cast_decimal_to_int
SELECT id, CAST(m AS INT) AS v FROM nums;
-- case: cast_int_to_decimal
SELECT id, CAST(i AS DECIMAL(12, 2)) AS v FROM nums WHERE id <> 4 AND id <> 5;
-- case: cast_decimal_rescale_rounds
SELECT id, CAST(m AS DECIMAL(10, 1)) AS v FROM nums WHERE id <> 4 AND id <> 5;
-- case: cast_decimal_overflow_null
SELECT id, CAST(m AS DECIMAL(5, 2)) AS v FROM nums;
-- case: cast_double_to_decimal
SELECT id, CAST(d AS DECIMAL(10, 3)) AS v FROM nums WHERE id IN (1, 2, 3, 7, 8, 9);
-- case: cast_int_to_double
SELECT id, CAST(i AS DOUBLE) / 2 AS v FROM nums;
-- case: cast_int_to_boolean
SELECT id, CAST(i AS BOOLEAN) AS v FROM nums WHERE id IN (1, 2, 3, 6);
-- case: cast_timestamp_to_date
SELECT id, CAST(ts AS DATE) AS v FROM events WHERE id <= 3;
-- case: cast_string_to_timestamp
SELECT id, CAST(s AS TIMESTAMP(3)) AS v FROM strs WHERE id = 12;
-- case: cast_timestamp_precision
SELECT id, CAST(ts AS TIMESTAMP(0)) AS v, CAST(ts AS TIMESTAMP(6)) AS w FROM events WHERE id <= 3;
-- case: cast_string_to_varchar_n
SELECT id, CAST(s AS VARCHAR(3)) AS v, CAST(s AS CHAR(3)) AS c FROM strs WHERE id IN (1, 2, 6);
-- case: cast_null_typed
SELECT id, CAST(NULL AS DECIMAL(5, 1)) AS v FROM nums WHERE id = 1;
-- case: cast_float
SELECT id, CAST(d AS FLOAT) AS v FROM nums WHERE id IN (2, 8, 9);
-- case: cast_tinyint_overflow
SELECT id, CAST(i AS TINYINT) AS v FROM nums WHERE id IN (2, 9);
-- case: cast_varchar_char_no_length
SELECT id, CAST(s AS VARCHAR) AS v, CAST(s AS CHAR) AS c FROM strs WHERE id IN (1, 2, 6);
-- case: cast_number_to_char_n
SELECT id, CAST(i AS VARCHAR(2)) AS v, CAST(i AS CHAR(6)) AS c FROM nums WHERE id IN (1, 2, 9);
-- case: cast_literal_to_timestamp0
SELECT CAST('2024-03-01 10:00:03.999' AS TIMESTAMP(0)) AS t, CAST(TIMESTAMP '1969-12-31 23:59:59.5' AS TIMESTAMP(0)) AS u;
