-- Nested types (ARRAY, MAP, ROW) from JSON: access, constructors, functions, UNNEST; NULL and empty
-- collections, NULL elements, out-of-range indexes, unicode. Nested result columns are compared as
-- Flink's CAST(... AS STRING) text (PyFlink cannot collect them), MAP columns with their entries
-- sorted: Flink's map order is its hash order, so MAP_KEYS/MAP_VALUES are shown on maps of one key.

-- case: select_all
SELECT * FROM nested_docs;
-- case: array_index
SELECT id, tags[1] AS t1, tags[3] AS t3, nums[2] AS n2 FROM nested_docs;
-- case: array_index_out_of_range
SELECT id, tags[10] AS t10, nums[5] AS n5 FROM nested_docs;
-- case: array_index_zero
SELECT id, nums[0] AS n0 FROM nested_docs;
-- case: array_index_negative
SELECT id, nums[-1] AS n FROM nested_docs WHERE id = 1;
-- case: array_index_column
SELECT id, nums[id] AS n FROM nested_docs;
-- case: map_access
SELECT id, attrs['a'] AS a, attrs['ü'] AS u, attrs['e'] AS e, attrs['missing'] AS m FROM nested_docs;
-- case: row_field_access
SELECT id, info.name AS name, info.age AS age, info.addr.city AS city FROM nested_docs;
-- case: row_field_table_qualified
SELECT d.id, d.info.addr.zip AS zip, d.info.name AS name FROM nested_docs AS d;
-- case: array_of_rows_access
SELECT id, items[1].sku AS sku, items[2].qty AS qty FROM nested_docs;
-- case: select_row_column
SELECT id, info, info.addr AS addr FROM nested_docs;
-- case: cardinality
SELECT id, CARDINALITY(tags) AS nt, CARDINALITY(attrs) AS na, CARDINALITY(items) AS ni FROM nested_docs;
-- case: element_single
SELECT id, ELEMENT(nums) AS e, ELEMENT(tags) AS t FROM nested_docs WHERE id IN (2, 3, 5, 6);
-- case: element_more_than_one
SELECT id, ELEMENT(nums) AS e FROM nested_docs;
-- case: array_contains
SELECT id, ARRAY_CONTAINS(tags, 'a') AS a, ARRAY_CONTAINS(nums, 7) AS s FROM nested_docs;
-- case: array_contains_null
SELECT id, ARRAY_CONTAINS(nums, CAST(NULL AS INT)) AS n FROM nested_docs;
-- case: array_distinct
SELECT id, ARRAY_DISTINCT(tags) AS d, ARRAY_DISTINCT(nums) AS n FROM nested_docs;
-- case: map_keys_values
SELECT id, MAP_KEYS(attrs) AS k, MAP_VALUES(attrs) AS v FROM nested_docs WHERE id IN (2, 3, 5, 6);
-- case: map_keys_values_contents
SELECT id, ARRAY_CONTAINS(MAP_KEYS(attrs), 'c') AS k, ARRAY_CONTAINS(MAP_VALUES(attrs), 4) AS v, CARDINALITY(MAP_VALUES(attrs)) AS n FROM nested_docs;
-- case: array_constructor
SELECT id, ARRAY[id, id * 2] AS a, ARRAY['x', tags[1]] AS b FROM nested_docs;
-- case: array_constructor_widening
SELECT ARRAY[1, 2.5] AS a, ARRAY[CAST(1 AS BIGINT), 2] AS b, ARRAY[1, NULL] AS c FROM nested_docs WHERE id = 1;
-- case: array_constructor_index
SELECT id, ARRAY[10, 20, 30][2] AS x, ARRAY['p', CAST(NULL AS STRING)][id] AS y FROM nested_docs;
-- case: array_constructor_index_not_null_elements
SELECT id, ARRAY['p', 'q'][id] AS y, ARRAY[10, 20][id] AS z FROM nested_docs;
-- case: map_constructor
SELECT id, MAP['j', id, 'k', id + 1] AS m FROM nested_docs WHERE id < 4;
-- case: map_constructor_access
SELECT id, MAP['a', 1, 'b', 2]['b'] AS b, MAP[1, id][id] AS o FROM nested_docs;
-- case: map_constructor_missing_key_not_null_values
SELECT id, MAP[1, 'one'][id] AS o FROM nested_docs;
-- case: map_duplicate_keys
SELECT MAP['a', 1, 'a', 2]['a'] AS a, CARDINALITY(MAP['a', 1, 'a', 2]) AS n FROM nested_docs WHERE id = 1;
-- case: cast_row_to_string
SELECT id, CAST(info AS STRING) AS s FROM nested_docs;
-- case: row_constructor
SELECT id, ROW(id, info.name) AS r FROM nested_docs;
-- case: cast_array
SELECT id, CAST(nums AS ARRAY<BIGINT>) AS b FROM nested_docs;
-- case: where_on_nested
SELECT id FROM nested_docs WHERE ARRAY_CONTAINS(tags, 'a') AND info.age > 30;
-- case: unnest_array
SELECT id, t FROM nested_docs CROSS JOIN UNNEST(tags) AS u(t);
-- case: unnest_comma
SELECT id, n FROM nested_docs, UNNEST(nums) AS u(n);
-- case: unnest_ordinality
SELECT id, t, pos FROM nested_docs CROSS JOIN UNNEST(tags) WITH ORDINALITY AS u(t, pos);
-- case: unnest_map
SELECT id, k, v FROM nested_docs CROSS JOIN UNNEST(attrs) AS u(k, v);
-- case: unnest_rows
SELECT id, sku, qty FROM nested_docs CROSS JOIN UNNEST(items) AS u(sku, qty);
-- case: unnest_left_join
SELECT id, t FROM nested_docs LEFT JOIN UNNEST(tags) AS u(t) ON TRUE;
-- case: unnest_expression
SELECT id, x FROM nested_docs CROSS JOIN UNNEST(ARRAY[id, id + 100]) AS u(x);
-- case: unnest_then_aggregate
SELECT t, COUNT(*) AS c FROM nested_docs CROSS JOIN UNNEST(tags) AS u(t) WHERE t IS NOT NULL GROUP BY t;
-- case: unnest_non_array
SELECT id, x FROM nested_docs CROSS JOIN UNNEST(id) AS u(x);
-- case: group_by_row_field_max_element
SELECT info.name AS name, MAX(nums[1]) AS m, SUM(CARDINALITY(tags)) AS c FROM nested_docs GROUP BY info.name;
-- case: aggregate_max_of_map_value
SELECT MAX(attrs['c']) AS c, MIN(items[1].qty) AS q, COUNT(info.addr.city) AS n FROM nested_docs;
-- case: insert_json_roundtrip
CREATE TEMPORARY TABLE out_json (id INT, tags ARRAY<STRING>, attrs MAP<STRING, INT>, info ROW<name STRING, age INT>, items ARRAY<ROW<sku STRING, qty INT>>) WITH ('connector' = 'filesystem', 'path' = '{tmp}/out', 'format' = 'json');
INSERT INTO out_json SELECT id, tags, attrs, ROW(info.name, info.age), items FROM nested_docs;
SELECT * FROM out_json;
-- case: csv_map_column
CREATE TEMPORARY TABLE out_csv (id INT, attrs MAP<STRING, INT>) WITH ('connector' = 'filesystem', 'path' = '{tmp}/out', 'format' = 'csv');
INSERT INTO out_csv SELECT id, attrs FROM nested_docs;
SELECT * FROM out_csv;
-- case: unnest_nested_row_field
SELECT id, sku FROM nested_docs CROSS JOIN UNNEST(items) AS u(sku, qty) WHERE qty > 2;
-- case: unnest_two_arrays_in_sequence
SELECT id, t, n FROM nested_docs CROSS JOIN UNNEST(tags) AS u(t) CROSS JOIN UNNEST(nums) AS v(n) WHERE id = 1;
-- case: unnest_map_keys_function
SELECT id, k FROM nested_docs CROSS JOIN UNNEST(MAP_KEYS(attrs)) AS u(k);
-- case: array_of_arrays
SELECT ARRAY[ARRAY[1, 2], ARRAY[3]][2][1] AS x, CARDINALITY(ARRAY[ARRAY[1, 2], ARRAY[3]][1]) AS n FROM nested_docs WHERE id = 1;
-- case: map_key_type_mismatch
SELECT attrs[1] AS x FROM nested_docs;
-- case: index_non_integer
SELECT tags['a'] AS x FROM nested_docs;
-- case: field_unknown
SELECT info.nope AS x FROM nested_docs;
-- case: unnest_from_constant
SELECT x FROM UNNEST(ARRAY[3, 1, 2]) AS t(x);
-- case: unnest_default_names
SELECT * FROM nested_docs CROSS JOIN UNNEST(nums) WHERE id = 1;
-- case: unnest_map_default_names
SELECT * FROM nested_docs CROSS JOIN UNNEST(attrs) WHERE id = 5;
-- case: unnest_rows_default_names
SELECT * FROM nested_docs CROSS JOIN UNNEST(items) WHERE id = 1;
-- case: unnest_ordinality_default_names
SELECT * FROM nested_docs CROSS JOIN UNNEST(tags) WITH ORDINALITY WHERE id = 1;
-- case: unnest_inner_join_on_condition
SELECT id, t FROM nested_docs JOIN UNNEST(tags) AS u(t) ON t <> 'a';
-- case: unnest_left_join_ordinality
SELECT id, t, n FROM nested_docs LEFT JOIN UNNEST(tags) WITH ORDINALITY AS u(t, n) ON TRUE;
-- case: unnest_updating_input
SELECT name, x FROM (SELECT info.name AS name, ARRAY[COUNT(*), MAX(id)] AS a FROM nested_docs GROUP BY info.name) CROSS JOIN UNNEST(a) AS u(x);
-- case: unnest_row_field_of_array
SELECT id, c FROM (SELECT id, ARRAY[info.addr.city, info.addr.zip] AS cz FROM nested_docs) CROSS JOIN UNNEST(cz) AS u(c) WHERE id IN (1, 4, 5);
-- case: csv_array_and_row_fields
SELECT id, tags, r, n, CARDINALITY(tags) AS c FROM bags;
-- case: csv_array_unnest
SELECT id, t FROM bags CROSS JOIN UNNEST(tags) AS u(t);
-- case: csv_row_field_access
SELECT id, r.a AS a, r.b AS b, n[2] AS n2 FROM bags;
-- case: csv_empty_element_without_null_literal
CREATE TEMPORARY TABLE bags_strict (id INT, tags ARRAY<STRING>, r ROW<a INT, b STRING>, n ARRAY<INT>) WITH ('connector' = 'filesystem', 'path' = '{data}/bags.csv', 'format' = 'csv');
SELECT id, r.a AS a FROM bags_strict;
-- case: csv_nested_write_roundtrip
CREATE TEMPORARY TABLE out_csv (id INT, tags ARRAY<STRING>, r ROW<a INT, b STRING>) WITH ('connector' = 'filesystem', 'path' = '{tmp}/out', 'format' = 'csv', 'csv.null-literal' = '', 'csv.array-element-delimiter' = '|');
INSERT INTO out_csv SELECT id, tags, info FROM (SELECT id, tags, ROW(CARDINALITY(nums), info.name) AS info FROM nested_docs);
SELECT id, tags, r FROM out_csv;
-- case: array_index_computed_below_one
SELECT id, nums[id - 2] AS n FROM nested_docs WHERE id IN (1, 2, 3, 4);
-- case: map_int_keys_from_constructor_unnest
SELECT k, v FROM UNNEST(MAP[2, 'b', 1, 'a']) AS t(k, v);
-- case: array_contains_row_field
SELECT id, ARRAY_CONTAINS(ARRAY['Ann', 'Bo'], info.name) AS known FROM nested_docs;
-- case: implicit_row_constructor
SELECT id, (id, info.name) AS r FROM nested_docs;
-- case: cast_row_constructor_to_named_row
SELECT id, CAST(ROW(id, info.name) AS ROW<n INT, who STRING>).who AS who FROM nested_docs;
-- case: cast_array_of_strings_to_ints
SELECT CAST(ARRAY['1', '22'] AS ARRAY<INT>) AS a, CAST(MAP['k', 1] AS MAP<STRING, BIGINT>) AS m FROM nested_docs WHERE id = 1;
-- case: array_equality
SELECT id, tags = ARRAY['a', 'b', 'c'] AS e, nums <> ARRAY[42] AS ne, ARRAY[1, CAST(NULL AS INT)] = ARRAY[1, CAST(NULL AS INT)] AS n FROM nested_docs;
-- case: row_and_map_equality
SELECT id, info.addr = ROW('Berlin', '10115') AS r, attrs = MAP['a', 1, 'b', 2] AS m FROM nested_docs;
-- case: where_array_equals
SELECT id FROM nested_docs WHERE tags = ARRAY['only'];
