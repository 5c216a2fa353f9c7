-- Math functions with negative, zero, NULL and extreme arguments.

-- case: abs
SELECT id, ABS(i) AS ai, ABS(d) AS ad, ABS(m) AS am FROM nums WHERE id <> 5;
-- case: abs_int_min
SELECT id, ABS(i) AS ai FROM nums WHERE id = 5;
-- case: ceil_floor_double
SELECT id, CEIL(d) AS c, FLOOR(d) AS f FROM nums WHERE id <> 4;
-- case: ceil_floor_decimal
SELECT id, CEIL(m) AS c, FLOOR(m) AS f, CEILING(m) AS c2 FROM nums;
-- case: round_double
SELECT id, ROUND(d, 1) AS r1, ROUND(d) AS r0, ROUND(d, -1) AS rm FROM nums WHERE id <> 4;
-- case: round_decimal
SELECT id, ROUND(m, 2) AS r2, ROUND(m, 0) AS r0, ROUND(m, -2) AS rm FROM nums;
-- case: round_half_values
SELECT id, ROUND(2.5, 0) AS a, ROUND(-2.5, 0) AS b, ROUND(0.125, 2) AS c, ROUND(CAST(2.5 AS DOUBLE), 0) AS d FROM nums WHERE id = 1;
-- case: round_int
SELECT id, ROUND(i, -1) AS r FROM nums WHERE i IS NOT NULL AND id <> 4 AND id <> 5;
-- case: truncate_fn
SELECT id, TRUNCATE(d, 1) AS t, TRUNCATE(m, 1) AS tm FROM nums WHERE id <> 4;
-- case: power_sqrt
SELECT id, POWER(i, 2) AS p, SQRT(ABS(d)) AS s FROM nums WHERE id IN (1, 2, 3, 7, 9);
-- case: sqrt_negative_nan
SELECT id, SQRT(d) AS s FROM nums WHERE id = 3;
-- case: ln_log10_log2
SELECT id, LN(d) AS l, LOG10(d) AS l10, LOG2(d) AS l2 FROM nums WHERE id IN (2, 7, 9);
-- case: log_of_zero_and_negative
SELECT id, LN(d) AS l FROM nums WHERE id IN (1, 3);
-- case: log_two_args
SELECT id, LOG(2, d) AS l FROM nums WHERE id IN (2, 7);
-- case: exp
SELECT id, EXP(d) AS e FROM nums WHERE id IN (1, 2, 3, 8);
-- case: sign
SELECT id, SIGN(i) AS s, SIGN(d) AS sd, SIGN(m) AS sm FROM nums;
-- case: trig
SELECT id, SIN(d) AS s, COS(d) AS c, TAN(d) AS t, ATAN(d) AS a FROM nums WHERE id IN (1, 2, 3, 8);
-- case: asin_acos_out_of_range
SELECT id, ASIN(d) AS a, ACOS(d) AS b FROM nums WHERE id IN (1, 2, 8);
-- case: atan2
SELECT id, ATAN2(d, 2.0) AS a FROM nums WHERE id IN (1, 2, 3);
-- case: degrees_radians_pi
SELECT id, DEGREES(d) AS deg, RADIANS(d) AS rad, PI() AS p FROM nums WHERE id IN (1, 2, 3);
-- case: e_constant
SELECT id, E() AS e FROM nums WHERE id = 1;
-- case: sinh_cosh_tanh_cot
SELECT id, SINH(d) AS s, COSH(d) AS c, TANH(d) AS t, COT(d) AS ct FROM nums WHERE id IN (2, 3, 8);
-- case: mod_decimal
SELECT id, MOD(m, 2) AS r FROM nums WHERE m IS NOT NULL;
-- case: power_negative_exponent
SELECT id, POWER(d, -1) AS p FROM nums WHERE id IN (2, 3, 8);
-- case: rand_seeded_sequences
SELECT id, RAND(42) AS r, RAND_INTEGER(7, 100) AS i, RAND_INTEGER(7, 16) AS p FROM events WHERE id <= 6;
-- case: rand_unseeded_ranges
SELECT COUNT(*) AS n, MIN(RAND()) >= 0 AS lo, MAX(RAND()) < 1 AS hi, MIN(RAND_INTEGER(5)) >= 0 AS ilo, MAX(RAND_INTEGER(5)) < 5 AS ihi, MIN(CHAR_LENGTH(UUID())) AS ul, COUNT(DISTINCT UUID()) AS ud FROM events;
