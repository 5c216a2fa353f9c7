-- MATCH_RECOGNIZE on event time: patterns, quantifiers, AFTER MATCH SKIP variants, measures.
-- ticks (tables.sql) is in time order: late rows would make Flink's answers vary between runs.

-- case: v_shape
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES S.price AS start_price, LAST(DOWN.price) AS bottom, LAST(UP.price) AS top, MATCH_ROWTIME() AS mt ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (S DOWN+ UP) DEFINE DOWN AS (LAST(DOWN.price, 1) IS NULL AND DOWN.price < S.price) OR DOWN.price < LAST(DOWN.price, 1), UP AS UP.price > LAST(DOWN.price)) AS r;
-- case: v_shape_default_skip
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(DOWN.price) AS fd, COUNT(DOWN.price) AS n ONE ROW PER MATCH PATTERN (S DOWN+ UP) DEFINE DOWN AS (LAST(DOWN.price, 1) IS NULL AND DOWN.price < S.price) OR DOWN.price < LAST(DOWN.price, 1), UP AS UP.price > LAST(DOWN.price)) AS r;
-- case: skip_to_next_row
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, LAST(A.price) AS a1, B.price AS b ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A+ B) DEFINE A AS A.price > 10, B AS B.price < LAST(A.price)) AS r;
-- case: skip_to_first
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a, FIRST(B.price) AS b, C.price AS c ONE ROW PER MATCH AFTER MATCH SKIP TO FIRST B PATTERN (A B+ C) DEFINE B AS B.price > LAST(A.price), C AS C.price <= LAST(B.price)) AS r;
-- case: skip_to_last
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a, LAST(B.price) AS b, C.price AS c ONE ROW PER MATCH AFTER MATCH SKIP TO LAST B PATTERN (A B+ C) DEFINE B AS B.price > LAST(A.price), C AS C.price <= LAST(B.price)) AS r;
-- case: star_quantifier
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a, COUNT(B.price) AS nb, SUM(B.tax) AS sb, C.price AS c ONE ROW PER MATCH PATTERN (A B* C) DEFINE A AS A.price > 15, B AS B.price > 15, C AS C.price <= 15) AS r;
-- case: optional_quantifier
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b, C.price AS c ONE ROW PER MATCH PATTERN (A B? C) DEFINE A AS A.tax = 1, B AS B.tax = 2, C AS C.tax >= 1) AS r;
-- case: exact_quantifier
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, LAST(A.price) AS a1, B.price AS b ONE ROW PER MATCH PATTERN (A{3} B) DEFINE A AS A.price >= 3, B AS B.tax >= 1) AS r;
-- case: range_quantifier
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS n, MIN(A.price) AS lo, MAX(A.price) AS hi, AVG(A.price) AS av, B.price AS b ONE ROW PER MATCH PATTERN (A{2,3} B) DEFINE A AS A.price > 15, B AS B.tax = 1) AS r;
-- case: at_least_quantifier
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS n, SUM(A.price) AS s, B.price AS b ONE ROW PER MATCH PATTERN (A{2,} B) DEFINE A AS LAST(A.price, 1) IS NULL OR A.price > LAST(A.price, 1), B AS B.price < LAST(A.price)) AS r;
-- case: prev_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, MATCH_ROWTIME() AS mt ONE ROW PER MATCH PATTERN (A) DEFINE A AS A.price > PREV(A.price, 2)) AS r;
-- case: nulls_in_conditions
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.price IS NULL OR A.price > 18, B AS B.tax > 0) AS r;
-- case: no_partition
SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.ts) AS t0, COUNT(A.price) AS n, B.sym AS bs ONE ROW PER MATCH PATTERN (A+ B) DEFINE A AS A.price < 10, B AS B.price >= 10) AS r;
-- case: first_offset_in_define
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, LAST(A.price) AS a1, FIRST(A.price, 1) AS a01, LAST(A.price, 1) AS a11, B.price AS b ONE ROW PER MATCH PATTERN (A{2,} B) DEFINE A AS A.price >= FIRST(A.price), B AS B.price < FIRST(A.price, 1)) AS r;
-- case: unqualified_in_define_and_measures
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES price AS last_price, COUNT(*) AS n, MATCH_ROWTIME() AS mt ONE ROW PER MATCH PATTERN (A B+ C) DEFINE B AS tax = 1, C AS price > A.price) AS r;
-- case: match_rowtime_window
CREATE VIEW m AS SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES MATCH_ROWTIME() AS mt, A.price AS a ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
SELECT sym, window_start, COUNT(*) AS n_matches FROM TABLE(TUMBLE(TABLE m, DESCRIPTOR(mt), INTERVAL '5' SECOND)) GROUP BY sym, window_start, window_end;
-- case: no_match
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.price > 1000, B AS B.price > 0) AS r;
-- case: orders_increasing_qty
SELECT * FROM orders MATCH_RECOGNIZE (PARTITION BY user_id ORDER BY ts MEASURES FIRST(A.order_id) AS first_id, LAST(A.order_id) AS last_id, B.order_id AS b_id, SUM(A.amount) AS total, MATCH_ROWTIME() AS mt ONE ROW PER MATCH PATTERN (A+ B) DEFINE A AS A.price > 20, B AS B.price <= 20 OR B.price IS NULL) AS r;
-- case: events_partitions
SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY uid ORDER BY ts MEASURES A.id AS a_id, B.id AS b_id, B.score - A.score AS diff ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.score > A.score) AS r;
-- case: select_measures_only
SELECT bottom, sym FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(DOWN.price) AS bottom ONE ROW PER MATCH PATTERN (S DOWN+ UP) DEFINE DOWN AS (LAST(DOWN.price, 1) IS NULL AND DOWN.price < S.price) OR DOWN.price < LAST(DOWN.price, 1), UP AS UP.price > LAST(DOWN.price)) AS r WHERE bottom < 16;
-- case: order_by_not_rowtime
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY price MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.price > 1) AS r;
-- case: greedy_last_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.price > 1) AS r;
-- case: undefined_variable_in_measures
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES Z.price AS z ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.price > 1) AS r;
-- case: reluctant_plus
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, COUNT(A.price) AS n, B.price AS b ONE ROW PER MATCH PATTERN (A+? B) DEFINE A AS A.price > 15, B AS B.tax = 1) AS r;
-- case: reluctant_star
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES S.price AS s, COUNT(A.price) AS n, B.price AS b ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (S A*? B) DEFINE A AS A.price > S.price, B AS B.price > LAST(A.price) OR B.tax = 3) AS r;
-- case: reluctant_range
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS n, SUM(A.price) AS s, B.price AS b ONE ROW PER MATCH PATTERN (A{2,3}? B) DEFINE A AS A.price > 15, B AS B.price > 15) AS r;
-- case: reluctant_last
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, COUNT(B.price) AS n, LAST(B.price) AS b ONE ROW PER MATCH PATTERN (A B+?) DEFINE A AS A.tax = 2, B AS B.price > A.price) AS r;
-- case: exact_last
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, FIRST(B.price) AS b0, LAST(B.price) AS b1 ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B{2}) DEFINE B AS B.price > A.price) AS r;
-- case: greedy_stops_at_max_for_next
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS n, B.price AS b ONE ROW PER MATCH PATTERN (A{1,2} B) DEFINE A AS A.price > 10, B AS B.price > 0) AS r;
-- case: reluctant_optional_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A?? B) DEFINE B AS B.price > 1) AS r;
-- case: skip_to_first_missing_variable
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, C.price AS c ONE ROW PER MATCH AFTER MATCH SKIP TO FIRST B PATTERN (A B? C) DEFINE A AS A.tax = 1, B AS B.tax = 2, C AS C.tax = 3) AS r;
-- case: aggregate_in_define_running_sum
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, COUNT(A.price) AS n, SUM(A.price) AS s, B.price AS b ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A+ B) DEFINE A AS SUM(A.price) < 60, B AS B.tax = 1) AS r;
-- case: aggregate_in_define_avg_of_other
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS n, AVG(A.price) AS av, B.price AS b ONE ROW PER MATCH PATTERN (A{2,} B) DEFINE A AS A.price > 10, B AS B.price < AVG(A.price) - 2) AS r;
-- case: aggregate_in_define_count_star
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(*) AS n, MAX(A.tax) AS mx, LAST(B.price) AS b ONE ROW PER MATCH PATTERN (A+ B) DEFINE A AS COUNT(*) <= 3 AND A.price IS NOT NULL, B AS MIN(A.price) < B.price) AS r;
-- case: within_v_shape
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES S.price AS s, LAST(DOWN.price) AS bottom, UP.price AS top, MATCH_ROWTIME() AS mt ONE ROW PER MATCH PATTERN (S DOWN+ UP) WITHIN INTERVAL '4' SECOND DEFINE DOWN AS (LAST(DOWN.price, 1) IS NULL AND DOWN.price < S.price) OR DOWN.price < LAST(DOWN.price, 1), UP AS UP.price > LAST(DOWN.price)) AS r;
-- case: within_times_out_long_runs
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, COUNT(A.price) AS n, B.price AS b ONE ROW PER MATCH PATTERN (A+ B) WITHIN INTERVAL '2' SECOND DEFINE A AS A.price > 15, B AS B.price <= 15) AS r;
-- case: within_unblocks_pending_match
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, COUNT(B.price) AS n, C.price AS c ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+? C) WITHIN INTERVAL '3' SECOND DEFINE B AS B.price > 10, C AS C.tax = 3) AS r;
-- case: alternation_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A (B | C)) DEFINE B AS B.price > 1, C AS C.price < 1) AS r;
-- case: group_pattern_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN ((A B)+ C) DEFINE B AS B.price > 1) AS r;
-- case: duplicate_variable_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B A) DEFINE B AS B.price > 1) AS r;
-- case: ties_ordered_by_further_columns
SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts, price DESC MEASURES A.sym AS a_sym, A.price AS a, B.sym AS b_sym, B.price AS b ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: order_by_rowtime_descending_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts DESC MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > 1) AS r;
-- case: prev_default_offset_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > PREV(B.price)) AS r;
-- case: prev_zero_offset
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b ONE ROW PER MATCH PATTERN (A B) DEFINE B AS PREV(B.price, 0) > A.price + 2) AS r;
-- case: next_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > NEXT(B.price)) AS r;
-- case: prev_in_measures_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES PREV(B.price) AS p ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: classifier_in_measures
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, CLASSIFIER() AS c ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: match_number_in_measures
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, MATCH_NUMBER() AS n ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: all_rows_per_match
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ALL ROWS PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: permute_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (PERMUTE(A, B)) DEFINE B AS B.price > 1) AS r;
-- case: exclusion_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A {- B -} C) DEFINE B AS B.price > 1) AS r;
-- case: top_alternation_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A | B) DEFINE B AS B.price > 1) AS r;
-- case: define_of_unknown_variable
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B) DEFINE Z AS Z.price > 1) AS r;
-- case: final_last_in_measures
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FINAL LAST(B.price) AS fb, RUNNING LAST(B.price) AS rb, A.price AS a ONE ROW PER MATCH PATTERN (A B{2}) DEFINE B AS B.price > A.price) AS r;
-- case: subset_in_measures
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(AB.price) AS ab ONE ROW PER MATCH PATTERN (A B C) SUBSET AB = (A, B) DEFINE B AS B.price > A.price, C AS C.price > B.price) AS r;
-- case: count_distinct_in_measures_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(DISTINCT A.tax) AS n, B.price AS b ONE ROW PER MATCH PATTERN (A+ B) DEFINE A AS A.price > 15, B AS B.price <= 15) AS r;
-- case: define_not_boolean
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price + 1) AS r;
-- case: up_to_quantifier
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS n, B.price AS b ONE ROW PER MATCH PATTERN (A{,2} B) DEFINE A AS A.price > 15, B AS B.price <= 15) AS r;
-- case: match_proctime_measure
SELECT sym, a FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, MATCH_PROCTIME() AS pt ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: within_month_refused
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN (A B) WITHIN INTERVAL '1' MONTH DEFINE B AS B.price > A.price) AS r;
-- case: measure_unknown_column
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.nope AS a ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: prev_zero_offset_other_variable
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b ONE ROW PER MATCH PATTERN (A B) DEFINE A AS A.tax = 1, B AS B.price > PREV(A.price, 0)) AS r;
-- case: final_in_measures
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FINAL LAST(B.price) AS fb, A.price AS a ONE ROW PER MATCH PATTERN (A B{2}) DEFINE B AS B.price > A.price) AS r;
-- case: subset_in_define
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, C.price AS c ONE ROW PER MATCH PATTERN (A B C) SUBSET AB = (A, B) DEFINE B AS B.price > A.price, C AS C.price < LAST(AB.price, 1)) AS r;
-- case: subset_aggregates
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(AC.price) AS f, SUM(AC.price) AS s, COUNT(AC.price) AS n, MAX(BC.tax) AS mx ONE ROW PER MATCH PATTERN (A B+ C) SUBSET AC = (A, C), BC = (B, C) DEFINE B AS B.price > A.price, C AS C.price < LAST(B.price)) AS r;
-- case: subset_unknown_variable
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(AZ.price) AS p ONE ROW PER MATCH PATTERN (A B) SUBSET AZ = (A, Z) DEFINE B AS B.price > A.price) AS r;
-- case: match_proctime_is_now
SELECT sym, a, EXTRACT(YEAR FROM pt) >= 2024 AS recent FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, MATCH_PROCTIME() AS pt ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: optional_as_zero_to_one
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, COUNT(B.price) AS n, C.price AS c ONE ROW PER MATCH PATTERN (A B{0,1} C) DEFINE A AS A.tax = 1, B AS B.tax = 2, C AS C.tax >= 1) AS r;
-- case: star_as_zero_or_more
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a, COUNT(B.price) AS nb, C.price AS c ONE ROW PER MATCH PATTERN (A B{0,} C) DEFINE A AS A.price > 15, B AS B.price > 15, C AS C.price <= 15) AS r;
-- case: subset_and_within_in_view
CREATE VIEW m AS SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, LAST(AB.price) AS ab, C.price AS c ONE ROW PER MATCH PATTERN (A B C) WITHIN INTERVAL '3' SECOND SUBSET AB = (A, B) DEFINE B AS B.price > A.price, C AS C.price > B.price) AS r;
SELECT * FROM m;
-- case: duplicate_measure_names
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS a ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: measure_named_as_partition_key
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS sym ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: empty_pattern
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a ONE ROW PER MATCH PATTERN () DEFINE B AS B.price > 1) AS r;
-- case: proctime_order
CREATE TEMPORARY VIEW tp AS SELECT sym, price, tax, PROCTIME() AS pt FROM ticks;
SELECT * FROM tp MATCH_RECOGNIZE (PARTITION BY sym ORDER BY pt MEASURES S.price AS start_price, LAST(DOWN.price) AS bottom, UP.price AS top ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (S DOWN+ UP) DEFINE DOWN AS (LAST(DOWN.price, 1) IS NULL AND DOWN.price < S.price) OR DOWN.price < LAST(DOWN.price, 1), UP AS UP.price > LAST(DOWN.price)) AS r;
-- case: proctime_order_match_rowtime
CREATE TEMPORARY VIEW tp AS SELECT sym, price, tax, PROCTIME() AS pt FROM ticks;
SELECT sym, a FROM tp MATCH_RECOGNIZE (PARTITION BY sym ORDER BY pt MEASURES A.price AS a, MATCH_ROWTIME() AS mt ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: next_zero_offset
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b ONE ROW PER MATCH PATTERN (A B) DEFINE B AS NEXT(B.price, 0) > A.price + 2) AS r;
-- case: last_negative_offset
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES LAST(A.price, -1) AS a, B.price AS b ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: match_rowtime_with_argument
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, MATCH_ROWTIME(ts) AS mt ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: match_rowtime_on_ltz
CREATE TEMPORARY TABLE ticks_ltz (sym STRING, price INT, tax INT, ts TIMESTAMP(3), tl AS CAST(ts AS TIMESTAMP_LTZ(3)), WATERMARK FOR tl AS tl - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}/ticks.csv', 'format' = 'csv', 'csv.null-literal' = '');
SELECT * FROM ticks_ltz MATCH_RECOGNIZE (PARTITION BY sym ORDER BY tl MEASURES A.price AS a, MATCH_ROWTIME() AS mt, MATCH_ROWTIME(tl) AS mtl ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: match_rowtime_argument_not_rowtime
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, MATCH_ROWTIME(price) AS mt ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.price > A.price) AS r;
-- case: define_reads_later_variable
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b ONE ROW PER MATCH PATTERN (A B) DEFINE A AS B.price IS NULL AND A.tax = 1, B AS B.price > A.price) AS r;
-- case: define_first_of_all_rows
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(price) AS f, LAST(price) AS l, COUNT(*) AS n ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+? C) DEFINE B AS price >= FIRST(price), C AS LAST(price, 1) > FIRST(price) + 5) AS r;
-- case: greedy_then_optional
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, COUNT(A.price) AS na, B.price AS b, C.price AS c ONE ROW PER MATCH PATTERN (A+ B? C) DEFINE A AS A.price > 15, B AS B.tax = 2, C AS C.tax = 1) AS r;
-- case: star_then_optional_then_single
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, COUNT(B.price) AS nb, C.price AS c, D.price AS d ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B* C? D) DEFINE B AS B.price > A.price, C AS C.tax = 3, D AS D.price < A.price) AS r;
-- case: reluctant_range_then_reluctant_plus
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS na, COUNT(B.price) AS nb, FIRST(A.price) AS a0, LAST(B.price) AS b1, C.price AS c ONE ROW PER MATCH PATTERN (A{2,3}? B+? C) DEFINE A AS A.price > 10, B AS B.price > 10, C AS C.tax = 1) AS r;
-- case: within_skip_to_last
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a, LAST(B.price) AS b, C.price AS c, MATCH_ROWTIME() AS mt ONE ROW PER MATCH AFTER MATCH SKIP TO LAST B PATTERN (A B+ C) WITHIN INTERVAL '5' SECOND DEFINE B AS B.price > LAST(A.price), C AS C.price <= LAST(B.price)) AS r;
-- case: exact_then_optional
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, B.price AS b, C.price AS c ONE ROW PER MATCH PATTERN (A{2} B? C) DEFINE A AS A.price > 15, B AS B.tax = 2, C AS C.tax = 1) AS r;
-- case: reluctant_then_optional
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a0, COUNT(A.price) AS na, B.price AS b, C.price AS c ONE ROW PER MATCH PATTERN (A+? B? C) DEFINE A AS A.price > 15, B AS B.tax = 2, C AS C.tax = 1) AS r;
-- case: optional_then_optional
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b, C.price AS c, D.price AS d ONE ROW PER MATCH PATTERN (A B? C? D) DEFINE A AS A.tax = 1, B AS B.tax = 2, C AS C.tax = 3, D AS D.price > A.price) AS r;
-- case: match_rowtime_of_a_held_back_match
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a, C.price AS c, MATCH_ROWTIME() AS mt ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+? C) DEFINE A AS A.tax = 1, B AS B.price > 0, C AS C.tax = 2 AND FIRST(A.price) > 15) AS r;
-- case: optional_first_variable
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, B.price AS b, C.price AS c ONE ROW PER MATCH PATTERN (A? B C) DEFINE A AS A.tax = 2, B AS B.tax = 1, C AS C.price > B.price) AS r;
-- case: star_first_variable
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS n, FIRST(A.price) AS a0, B.price AS b ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A* B) DEFINE A AS A.price > 15, B AS B.price <= 15) AS r;
-- case: greedy_range_middle
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS a, COUNT(B.price) AS nb, LAST(B.price) AS b1, C.price AS c ONE ROW PER MATCH PATTERN (A B{2,3} C) DEFINE B AS B.price > A.price, C AS C.tax = 1) AS r;
-- case: skip_to_first_greedy_within
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.price) AS a, FIRST(B.price) AS b0, LAST(B.price) AS b1, C.price AS c, MATCH_ROWTIME() AS mt ONE ROW PER MATCH AFTER MATCH SKIP TO FIRST B PATTERN (A B+ C) WITHIN INTERVAL '6' SECOND DEFINE B AS B.price > A.price, C AS C.price < LAST(B.price)) AS r;
-- case: measures_expressions
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES CASE WHEN LAST(B.price) > FIRST(A.price) THEN 'up' ELSE 'down' END AS dir, CAST(SUM(B.price) AS DOUBLE) / COUNT(B.price) AS avg_b, UPPER(FIRST(A.sym)) AS s, TIMESTAMPDIFF(SECOND, FIRST(A.ts), LAST(B.ts)) AS secs ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+?  C) DEFINE B AS B.tax <> 3, C AS C.tax = 3) AS r;
-- case: reluctant_at_least_then_single
SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES COUNT(A.price) AS n, FIRST(A.price) AS a0, B.price AS b ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A{2,}? B) DEFINE A AS A.price > 10, B AS B.tax = 1) AS r;
