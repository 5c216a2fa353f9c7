-- CAST of nested values holding ROWs: fields are taken by position and renamed, as Flink casts ROWs.

-- case: cast_array_of_rows_renames_fields_by_position
SELECT CAST(ARRAY[ROW('a', 5), ROW('b', CAST(NULL AS INT))] AS ARRAY<ROW<sku STRING, n INT>>) AS lines;
-- case: cast_null_array_of_rows
SELECT CAST(CAST(NULL AS ARRAY<ROW<x STRING, y INT>>) AS ARRAY<ROW<sku STRING, n INT>>) AS lines;
-- case: array_of_rows_field_after_cast
SELECT CAST(ARRAY[ROW('a', 5)] AS ARRAY<ROW<sku STRING, n INT>>)[1].sku AS sku;
-- case: cast_map_of_rows_renames_fields_by_position
SELECT CAST(MAP['k', ROW('a', 1)] AS MAP<STRING, ROW<x STRING, y INT>>) AS m;
-- case: map_of_rows_field_after_cast
SELECT CAST(MAP['k', ROW('a', 1)] AS MAP<STRING, ROW<x STRING, y INT>>)['k'].x AS x;
