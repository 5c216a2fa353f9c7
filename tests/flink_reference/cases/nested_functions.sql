-- Flink's further collection functions over the nested_docs table (ARRAY, MAP): NULL and empty collections,
-- NULL elements, unicode. Nested results are compared as Flink's CAST text (see nested.sql); a map's
-- entries are unnested, their order being Flink's hash order.

-- case: split
SELECT id, SPLIT(s, ',') AS a, SPLIT(s, '') AS chars, SPLIT(s, 'll') AS ll FROM strs WHERE id IN (1, 2, 3, 7);
-- case: array_join
SELECT id, ARRAY_JOIN(tags, '-') AS j, ARRAY_JOIN(tags, '-', '?') AS r FROM nested_docs;
-- case: array_reverse
SELECT id, ARRAY_REVERSE(tags) AS r, ARRAY_REVERSE(nums) AS n FROM nested_docs;
-- case: array_position
SELECT id, ARRAY_POSITION(tags, 'a') AS a, ARRAY_POSITION(nums, 5) AS f, ARRAY_POSITION(nums, 99) AS missing FROM nested_docs;
-- case: array_remove
SELECT id, ARRAY_REMOVE(tags, 'a') AS r, ARRAY_REMOVE(nums, CAST(NULL AS INT)) AS n FROM nested_docs;
-- case: array_concat
SELECT id, ARRAY_CONCAT(tags, ARRAY['z']) AS c, ARRAY_CONCAT(nums, nums, ARRAY[0]) AS n FROM nested_docs;
-- case: array_append_prepend
SELECT id, ARRAY_APPEND(nums, 9) AS a, ARRAY_PREPEND(tags, 'first') AS p FROM nested_docs;
-- case: array_max_min
SELECT id, ARRAY_MAX(nums) AS mx, ARRAY_MIN(nums) AS mn, ARRAY_MAX(tags) AS t FROM nested_docs;
-- case: array_slice
SELECT id, ARRAY_SLICE(nums, 2, 3) AS s, ARRAY_SLICE(nums, 2) AS tail, ARRAY_SLICE(nums, -2, -1) AS neg FROM nested_docs;
-- case: map_entries
SELECT id, k, v FROM nested_docs CROSS JOIN UNNEST(MAP_ENTRIES(attrs)) AS u(k, v);
-- case: map_entries_of_constructor
SELECT MAP_ENTRIES(MAP['k', 1]) AS e, CARDINALITY(MAP_ENTRIES(MAP['k', 1, 'j', 2])) AS n FROM nested_docs WHERE id = 1;
-- case: map_from_arrays
SELECT id, MAP_FROM_ARRAYS(tags, nums) AS m FROM nested_docs WHERE id IN (2, 3, 5, 6);
-- case: map_from_arrays_length_mismatch
SELECT id, MAP_FROM_ARRAYS(tags, nums) AS m FROM nested_docs WHERE id = 1;
-- case: array_sort
SELECT id, ARRAY_SORT(nums) AS a, ARRAY_SORT(nums, FALSE) AS d, ARRAY_SORT(tags, TRUE, FALSE) AS nl FROM nested_docs;
-- case: array_union
SELECT id, ARRAY_UNION(tags, ARRAY['b', 'x', 'b']) AS u FROM nested_docs;
-- case: array_intersect
SELECT id, ARRAY_INTERSECT(nums, ARRAY[5, 3, 7, CAST(NULL AS INT)]) AS i FROM nested_docs;
-- case: array_except
SELECT id, ARRAY_EXCEPT(tags, ARRAY['a', 'z']) AS e, ARRAY_EXCEPT(nums, ARRAY[CAST(NULL AS INT)]) AS n FROM nested_docs;
-- case: map_union
SELECT id, MAP_UNION(attrs, MAP['c', 100, 'z', 26]) AS m FROM nested_docs WHERE id IN (2, 3, 5, 6);
-- case: str_to_map
SELECT id, CARDINALITY(STR_TO_MAP(s)) AS n, STR_TO_MAP(s)['a'] AS a, STR_TO_MAP('k1=v1;k2', ';', '=')['k2'] AS k2 FROM strs WHERE id IN (1, 2, 3, 7);
-- case: str_to_map_values
SELECT STR_TO_MAP('a=1,b=2,a=3')['a'] AS a, STR_TO_MAP('x:1|y:2', '\|', ':')['y'] AS y, CARDINALITY(STR_TO_MAP('')) AS e, STR_TO_MAP('p==q')['p'] AS p FROM strs WHERE id = 1;
-- case: regexp_extract_all
SELECT id, REGEXP_EXTRACT_ALL(s, '([a-z])([a-z]+)') AS g1, REGEXP_EXTRACT_ALL(s, '([a-z])([a-z]+)', 2) AS g2, REGEXP_EXTRACT_ALL(s, '[0-9]', 0) AS d FROM strs WHERE id IN (1, 2, 3, 8, 11, 16);
-- case: regexp_extract_all_bad_group
SELECT REGEXP_EXTRACT_ALL(s, '(a)', 3) AS x FROM strs WHERE id = 1;
-- case: array_agg_group_by
SELECT info.name AS name, ARRAY_AGG(id) AS ids, ARRAY_AGG(nums[1]) AS firsts FROM nested_docs GROUP BY info.name;
-- case: array_agg_updating_input
SELECT c, ARRAY_AGG(n) AS names FROM (SELECT info.name AS n, COUNT(*) AS c FROM nested_docs GROUP BY info.name) GROUP BY c;
-- case: array_agg_window
SELECT window_start, ARRAY_AGG(user_id) AS users, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) WHERE order_id <= 12 GROUP BY window_start, window_end;
