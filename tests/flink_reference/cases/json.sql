-- JSON functions over the docs table's JSON texts (nested, invalid, JSON null, trailing garbage,
-- Long/BigInteger/BigDecimal numbers, escapes) and the JSON aggregates over events.

-- case: value_basic
SELECT id, JSON_VALUE(doc, '$.a') AS a, JSON_VALUE(doc, 'lax $.a') AS lax_a FROM docs;
-- case: value_nested_paths
SELECT id, JSON_VALUE(doc, '$.d.f') AS f, JSON_VALUE(doc, '$.b[0]') AS b0, JSON_VALUE(doc, '$.b[-1].c') AS last_c, JSON_VALUE(doc, '$["d"][''f'']') AS bracket, JSON_VALUE(doc, 'a') AS no_root FROM docs;
-- case: value_root
SELECT id, JSON_VALUE(doc, '$') AS v, JSON_VALUE(doc, 'lax $') AS lax_v FROM docs;
-- case: value_missing_strict_and_lax
SELECT id, JSON_VALUE(doc, '$.zz' DEFAULT 'empty' ON EMPTY DEFAULT 'error' ON ERROR) AS strict_zz, JSON_VALUE(doc, 'lax $.zz' DEFAULT 'empty' ON EMPTY DEFAULT 'error' ON ERROR) AS lax_zz FROM docs;
-- case: value_json_null_strict_and_lax
SELECT id, JSON_VALUE(doc, '$.d.e' DEFAULT 'empty' ON EMPTY DEFAULT 'error' ON ERROR) AS strict_e, JSON_VALUE(doc, 'LAX $.d.e' DEFAULT 'empty' ON EMPTY DEFAULT 'error' ON ERROR) AS lax_e FROM docs WHERE id IN (1, 9, 13);
-- case: value_non_scalar
SELECT id, JSON_VALUE(doc, '$.b' DEFAULT 'empty' ON EMPTY DEFAULT 'error' ON ERROR) AS strict_b, JSON_VALUE(doc, 'lax $.b' DEFAULT 'empty' ON EMPTY DEFAULT 'error' ON ERROR) AS lax_b FROM docs;
-- case: value_numbers_as_string
SELECT id, JSON_VALUE(doc, '$.a') AS a, JSON_VALUE(doc, '$.n') AS n, JSON_VALUE(doc, '$.d.f') AS f, JSON_VALUE(doc, '$.b') AS b, JSON_VALUE(doc, '$.c') AS c, JSON_VALUE(doc, '$.d') AS d FROM docs WHERE id IN (9, 12, 20);
-- case: value_unicode_and_escapes
SELECT id, JSON_VALUE(doc, '$.k') AS k, CHAR_LENGTH(JSON_VALUE(doc, '$.k')) AS n FROM docs WHERE id = 12;
-- case: value_path_column
SELECT id, path, JSON_VALUE(doc, path) AS v FROM docs;
-- case: value_returning_int
SELECT id, JSON_VALUE(doc, '$.a' RETURNING INT) AS a, JSON_VALUE(doc, '$.a' RETURNING INT) + 1 AS a1 FROM docs WHERE id IN (1, 2, 3, 7, 15, 19);
-- case: value_returning_int_of_long_fails
SELECT id, JSON_VALUE(doc, '$.a' RETURNING INT) AS a FROM docs WHERE id = 9;
-- case: value_returning_int_of_string_fails
SELECT id, JSON_VALUE(doc, '$.a' RETURNING INTEGER DEFAULT 0 ON ERROR) AS a FROM docs WHERE id = 13;
-- case: value_returning_int_default
SELECT id, JSON_VALUE(doc, 'lax $.zz' RETURNING INT DEFAULT -3 ON EMPTY) AS zz, JSON_VALUE(doc, '$.zz' RETURNING INT DEFAULT 7 ON ERROR) AS strict_zz FROM docs;
-- case: value_returning_double
SELECT id, JSON_VALUE(doc, '$.d.f' RETURNING DOUBLE) AS f, JSON_VALUE(doc, '$.b' RETURNING DOUBLE) AS b FROM docs WHERE id IN (1, 9, 20);
-- case: value_returning_double_of_integer_fails
SELECT id, JSON_VALUE(doc, '$.a' RETURNING DOUBLE) AS a FROM docs WHERE id = 1;
-- case: value_returning_boolean
SELECT id, JSON_VALUE(doc, '$.b' RETURNING BOOLEAN) AS b, JSON_VALUE(doc, '$' RETURNING BOOLEAN) AS root, JSON_VALUE(doc, 'lax $.zz' RETURNING BOOLEAN DEFAULT FALSE ON EMPTY) AS dflt FROM docs WHERE id IN (11, 13, 18);
-- case: value_returning_varchar
SELECT id, JSON_VALUE(doc, '$.a' RETURNING VARCHAR(10)) AS a FROM docs WHERE id IN (1, 13);
-- case: value_returning_decimal_refused
SELECT JSON_VALUE(doc, '$.b' RETURNING DECIMAL(10, 2)) AS b FROM docs;
-- case: value_returning_bigint_refused
SELECT JSON_VALUE(doc, '$.a' RETURNING BIGINT) AS a FROM docs;
-- case: value_defaults_of_other_types
SELECT id, JSON_VALUE(doc, 'lax $.zz' DEFAULT 1 ON EMPTY) AS i, JSON_VALUE(doc, 'lax $.zz' DEFAULT TRUE ON EMPTY) AS b, JSON_VALUE(doc, 'lax $.zz' DEFAULT CAST(2.5 AS DOUBLE) ON EMPTY) AS d FROM docs WHERE id = 1;
-- case: value_default_column_refused
SELECT id, JSON_VALUE(doc, 'lax $.zz' DEFAULT k ON EMPTY) AS dflt FROM docs;
-- case: value_default_expression
SELECT id, JSON_VALUE(doc, 'lax $.zz' DEFAULT 'x' || 'y' ON EMPTY) AS dflt FROM docs WHERE id <= 3;
-- case: value_error_on_error_fails
SELECT id, JSON_VALUE(doc, '$.zz' ERROR ON ERROR) AS v FROM docs WHERE id = 1;
-- case: value_error_on_empty_fails
SELECT id, JSON_VALUE(doc, 'lax $.zz' ERROR ON EMPTY) AS v FROM docs WHERE id = 1;
-- case: value_error_on_error_passes
SELECT id, JSON_VALUE(doc, '$.a' NULL ON EMPTY ERROR ON ERROR) AS v FROM docs WHERE id IN (1, 7, 19);
-- case: query_whole_document
SELECT id, JSON_QUERY(doc, '$') AS q FROM docs;
-- case: query_strict_and_lax_scalars
SELECT id, JSON_QUERY(doc, '$.a') AS a, JSON_QUERY(doc, 'lax $.a') AS lax_a, JSON_QUERY(doc, '$.b') AS b, JSON_QUERY(doc, '$.d') AS d FROM docs;
-- case: query_wrappers
SELECT id, JSON_QUERY(doc, '$.a' WITH WRAPPER) AS a_w, JSON_QUERY(doc, '$.b' WITH WRAPPER) AS b_w, JSON_QUERY(doc, '$.b' WITH CONDITIONAL ARRAY WRAPPER) AS b_c, JSON_QUERY(doc, '$.a' WITH CONDITIONAL WRAPPER) AS a_c, JSON_QUERY(doc, '$.b' WITH UNCONDITIONAL ARRAY WRAPPER) AS b_u, JSON_QUERY(doc, '$.b' WITHOUT ARRAY WRAPPER) AS b_none FROM docs WHERE id IN (1, 9, 13, 20);
-- case: query_empty_and_error_behaviours
SELECT id, JSON_QUERY(doc, 'lax $.zz' EMPTY ARRAY ON EMPTY) AS e_arr, JSON_QUERY(doc, 'lax $.a' EMPTY OBJECT ON EMPTY) AS e_obj, JSON_QUERY(doc, '$.zz' EMPTY OBJECT ON ERROR) AS r_obj, JSON_QUERY(doc, '$.a' NULL ON EMPTY EMPTY ARRAY ON ERROR) AS r_arr FROM docs;
-- case: query_wildcards
SELECT id, JSON_QUERY(doc, '$.b[*]') AS b_all, JSON_QUERY(doc, '$.*') AS members, JSON_QUERY(doc, '$.d.*') AS d_all, JSON_QUERY(doc, '$.b[*].c') AS cs, JSON_QUERY(doc, '$.*.b') AS bs, JSON_QUERY(doc, '$.q[*]') AS strict_q, JSON_QUERY(doc, 'lax $.q[*]') AS lax_q FROM docs;
-- case: query_indexes_and_slices
SELECT id, JSON_QUERY(doc, '$.a[1:3]') AS mid, JSON_QUERY(doc, '$.a[-2:]') AS tail, JSON_QUERY(doc, '$.a[:2]') AS head, JSON_QUERY(doc, '$.a[0,2]') AS picks, JSON_QUERY(doc, '$.a[7]' WITH WRAPPER) AS past FROM docs WHERE id IN (1, 20);
-- case: query_error_on_error_fails
SELECT id, JSON_QUERY(doc, '$.a' ERROR ON ERROR) AS a FROM docs WHERE id = 1;
-- case: query_returning_string
SELECT id, JSON_QUERY(doc, '$.d' RETURNING STRING) AS d FROM docs WHERE id IN (1, 9);
-- case: exists_behaviours
SELECT id, JSON_EXISTS(doc, '$.a') AS a, JSON_EXISTS(doc, 'lax $.a') AS lax_a, JSON_EXISTS(doc, '$.a' UNKNOWN ON ERROR) AS unknown_a, JSON_EXISTS(doc, '$.a' TRUE ON ERROR) AS true_a, JSON_EXISTS(doc, 'lax $.a' TRUE ON ERROR) AS lax_true_a, JSON_EXISTS(doc, '$.d.e') AS null_e, JSON_EXISTS(doc, 'lax $.d.e') AS lax_null_e FROM docs;
-- case: exists_indefinite_paths
SELECT id, JSON_EXISTS(doc, '$.b[*]') AS b_all, JSON_EXISTS(doc, '$.b[7]') AS b7, JSON_EXISTS(doc, '$.q[*]') AS q, JSON_EXISTS(doc, 'lax $.q[*]') AS lax_q FROM docs WHERE id IN (1, 9, 20);
-- case: exists_error_on_error_fails
SELECT id, JSON_EXISTS(doc, '$.a' ERROR ON ERROR) AS a FROM docs WHERE id = 2;
-- case: exists_in_where
SELECT id FROM docs WHERE JSON_EXISTS(doc, 'lax $.d.f');
-- case: is_json_kinds
SELECT id, doc IS JSON AS v, doc IS JSON VALUE AS v2, doc IS JSON OBJECT AS o, doc IS JSON ARRAY AS a, doc IS JSON SCALAR AS s FROM docs;
-- case: is_not_json
SELECT id, doc IS NOT JSON AS nj, doc IS NOT JSON OBJECT AS not_object FROM docs;
-- case: is_json_of_int_refused
SELECT id IS JSON AS j FROM docs;
-- case: json_string_numbers
SELECT id, JSON_STRING(i) AS i, JSON_STRING(b) AS b, JSON_STRING(d) AS d, JSON_STRING(m) AS m, JSON_STRING(s) AS s FROM nums;
-- case: json_string_other_types
SELECT id, JSON_STRING(kind) AS kind, JSON_STRING(flag) AS flag, JSON_STRING(ts) AS ts, JSON_STRING(CAST(score AS FLOAT)) AS f FROM events WHERE id <= 8;
-- case: json_string_of_json_object
SELECT JSON_STRING(JSON_OBJECT('a' VALUE 1)) AS o, JSON_STRING(JSON_ARRAY(1, 'x')) AS a, JSON_STRING(JSON_QUERY('{"b":1}', '$')) AS q;
-- case: json_string_date_refused
SELECT JSON_STRING(DATE '2024-01-02') AS d;
-- case: object_from_columns
SELECT id, JSON_OBJECT('s' VALUE s, 'n' VALUE n) AS o, JSON_OBJECT(KEY 'n' VALUE n ABSENT ON NULL) AS absent, JSON_OBJECT('n' : n NULL ON NULL) AS nulls FROM strs;
-- case: object_keys_sorted_and_repeated
SELECT JSON_OBJECT('b' VALUE 1, 'a' VALUE 2, 'é' VALUE 3, 'Z' VALUE 4, '' VALUE 5, '😀' VALUE 6, 'ｚ' VALUE 7, 'a' VALUE 8) AS o;
-- case: object_nullable_column_key_refused
SELECT id, JSON_OBJECT(KEY s VALUE n, KEY 'id' VALUE id) AS o FROM strs WHERE s IS NOT NULL;
-- case: object_constant_expression_keys
SELECT JSON_OBJECT(KEY 'a' || 'b' VALUE 1, KEY UPPER('c') VALUE 2) AS o;
-- case: object_nested_and_query_strings
SELECT id, JSON_OBJECT('o' VALUE JSON_OBJECT('z' VALUE 1, 'y' VALUE JSON_ARRAY(JSON_OBJECT('q' VALUE id))), 'q' VALUE JSON_QUERY(doc, '$.d'), 'v' VALUE JSON_VALUE(doc, '$.d.f')) AS o FROM docs WHERE id IN (1, 9);
-- case: object_of_numbers
SELECT id, JSON_OBJECT('i' VALUE i, 'b' VALUE b, 'd' VALUE d, 'm' VALUE m, 'f' VALUE CAST(d AS FLOAT)) AS o FROM nums;
-- case: object_of_times_and_bytes
SELECT JSON_OBJECT('t' VALUE TIMESTAMP '2024-01-02 03:04:05.120', 't0' VALUE TIMESTAMP '2024-01-02 03:04:00', 'ltz' VALUE TO_TIMESTAMP_LTZ(1500, 3), 'y' VALUE CAST('ab?' AS BYTES), 'nan' VALUE CAST('NaN' AS DOUBLE), 'inf' VALUE CAST('-Infinity' AS DOUBLE)) AS o;
-- case: object_empty_and_null_key_refused
SELECT JSON_OBJECT(KEY CAST(NULL AS STRING) VALUE 1) AS o;
-- case: object_of_date_refused
SELECT JSON_OBJECT('d' VALUE DATE '2024-01-02') AS o;
-- case: array_from_columns
SELECT id, JSON_ARRAY(id, s, n) AS a, JSON_ARRAY(s, n NULL ON NULL) AS nulls, JSON_ARRAY() AS e, JSON_OBJECT() AS eo FROM strs;
-- case: array_of_numbers
SELECT id, JSON_ARRAY(i, b, d, m, s) AS a FROM nums;
-- case: array_nested
SELECT id, JSON_ARRAY(JSON_ARRAY(id), JSON_OBJECT('k' VALUE k), doc) AS a FROM docs WHERE id IN (1, 2, 3);
-- case: arrayagg_group_by
SELECT uid, JSON_ARRAYAGG(kind) AS kinds, JSON_ARRAYAGG(kind NULL ON NULL) AS with_nulls, JSON_ARRAYAGG(score ABSENT ON NULL) AS scores FROM events GROUP BY uid;
-- case: arrayagg_global
SELECT JSON_ARRAYAGG(id) AS ids, JSON_ARRAYAGG(JSON_OBJECT('k' VALUE kind)) AS objects FROM events WHERE id <= 6;
-- case: objectagg_group_by
SELECT uid, JSON_OBJECTAGG(KEY CAST(id AS STRING) VALUE flag) AS flags, JSON_OBJECTAGG(CAST(id AS STRING) VALUE kind ABSENT ON NULL) AS kinds FROM events GROUP BY uid;
-- case: objectagg_nested_values
SELECT JSON_OBJECTAGG(KEY CAST(id AS STRING) VALUE JSON_ARRAY(score, flag)) AS o FROM events WHERE id <= 5;
-- case: objectagg_duplicate_key_fails
SELECT JSON_OBJECTAGG(KEY COALESCE(kind, 'none') VALUE id) AS o FROM events;
-- case: objectagg_null_key_fails
SELECT JSON_OBJECTAGG(KEY kind VALUE id) AS o FROM events;
-- case: arrayagg_tumble
SELECT window_start, JSON_ARRAYAGG(kind) AS kinds, JSON_OBJECTAGG(KEY CAST(id AS STRING) VALUE score) AS scores FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;
-- case: objectagg_hop
SELECT window_start, JSON_OBJECTAGG(KEY CAST(id AS STRING) VALUE kind) AS kinds FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end;
-- case: objectagg_session
SELECT window_start, window_end, JSON_OBJECTAGG(KEY CAST(id AS STRING) VALUE uid) AS uids FROM TABLE(SESSION(TABLE events, DESCRIPTOR(ts), INTERVAL '3' SECOND)) GROUP BY window_start, window_end;
-- case: arrayagg_hop_refused
SELECT window_start, JSON_ARRAYAGG(kind) AS kinds FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end;
-- case: arrayagg_over_refused
SELECT id, JSON_ARRAYAGG(kind) OVER (ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS kinds FROM events;
-- case: arrayagg_legacy_session_refused
SELECT SESSION_START(ts, INTERVAL '3' SECOND) AS s, JSON_OBJECTAGG(KEY CAST(id AS STRING) VALUE uid) AS uids FROM events GROUP BY SESSION(ts, INTERVAL '3' SECOND);
-- case: arrayagg_over_updating_input
SELECT c, JSON_ARRAYAGG(uid) AS uids FROM (SELECT uid, COUNT(*) AS c FROM events WHERE uid IS NOT NULL GROUP BY uid) GROUP BY c;
-- case: value_path_syntax_error
SELECT id, JSON_VALUE(doc, '$.a[') AS a FROM docs WHERE id = 1;
-- case: quote_and_unquote_strings
SELECT id, JSON_QUOTE(s) AS q, JSON_UNQUOTE(JSON_QUOTE(s)) AS round_trip, JSON_UNQUOTE(s) AS u FROM strs;
-- case: unquote_documents
SELECT id, JSON_UNQUOTE(doc) AS u, JSON_UNQUOTE(JSON_QUERY(doc, '$.k' WITH WRAPPER)) AS wrapped FROM docs;
-- case: raw_json_values
SELECT id, JSON_OBJECT('d' VALUE JSON(doc)) AS o, JSON_ARRAY(JSON(doc), JSON(' '), JSON(CAST(id AS STRING))) AS a FROM docs WHERE id IN (1, 4, 7, 8, 9, 12, 14, 19, 20);
-- case: raw_json_of_invalid_text_fails
SELECT JSON_ARRAY(JSON(doc)) AS a FROM docs WHERE id = 2;
-- case: raw_json_outside_constructors_refused
SELECT JSON(doc) AS j FROM docs;
-- case: group_by_json_value
SELECT JSON_VALUE(doc, 'lax $.a') AS a, COUNT(*) AS n, JSON_ARRAYAGG(id) AS ids FROM docs GROUP BY JSON_VALUE(doc, 'lax $.a');
-- case: aggregates_of_json_functions
SELECT k, JSON_ARRAYAGG(JSON_VALUE(doc, 'lax $.a' RETURNING INT) NULL ON NULL) AS a, COUNT(*) FILTER (WHERE doc IS JSON) AS valid, JSON_OBJECTAGG(KEY CAST(id AS STRING) VALUE JSON_QUERY(doc, 'lax $.b')) AS b FROM docs WHERE id NOT IN (9, 12, 13) GROUP BY k;
-- case: objectagg_cumulate
SELECT window_start, window_end, JSON_OBJECTAGG(KEY CAST(id AS STRING) VALUE kind ABSENT ON NULL) AS kinds FROM TABLE(CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND)) GROUP BY window_start, window_end;
-- case: arrayagg_tumble_keyed
SELECT uid, window_start, JSON_ARRAYAGG(score NULL ON NULL) AS scores FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '30' SECOND)) GROUP BY uid, window_start, window_end;
-- case: json_in_where_and_case
SELECT id, CASE WHEN doc IS JSON OBJECT THEN JSON_QUERY(doc, '$') WHEN doc IS JSON THEN 'other JSON' ELSE 'not JSON' END AS c FROM docs WHERE JSON_VALUE(doc, 'lax $.a') IS NOT NULL OR doc IS NOT JSON;
-- case: value_defaults_as_strings
SELECT JSON_VALUE(doc, 'lax $.zz' DEFAULT CAST(0.1 AS FLOAT) ON EMPTY) AS f, JSON_VALUE(doc, 'lax $.zz' DEFAULT CAST(1e10 AS DOUBLE) ON EMPTY) AS d, JSON_VALUE(doc, 'lax $.zz' DEFAULT CAST(0.00000001 AS DECIMAL(20, 10)) ON EMPTY) AS m, JSON_VALUE(doc, 'lax $.zz' DEFAULT CAST(5 AS BIGINT) ON EMPTY) AS b, JSON_VALUE(doc, 'lax $.zz' DEFAULT FALSE ON EMPTY) AS f2 FROM docs WHERE id = 1;
-- case: object_of_nanosecond_timestamps
SELECT JSON_OBJECT('t' VALUE CAST('2024-01-01 00:00:00.123456789' AS TIMESTAMP(9)), 't6' VALUE CAST('2024-01-01 00:00:00.000001' AS TIMESTAMP(6))) AS o;
-- case: query_returning_array
SELECT id, JSON_QUERY(doc, '$.b' RETURNING ARRAY<STRING>) AS b, JSON_QUERY(doc, 'lax $.zz' RETURNING ARRAY<STRING> EMPTY ARRAY ON EMPTY) AS e, JSON_QUERY(doc, '$.d' RETURNING ARRAY<STRING> EMPTY ARRAY ON ERROR) AS d, JSON_QUERY(doc, '$.*' RETURNING ARRAY<STRING>) AS members, JSON_QUERY(doc, '$.a' RETURNING ARRAY<STRING> WITH WRAPPER) AS wrapped FROM docs;
-- case: query_returning_array_of_int_refused
SELECT JSON_QUERY(doc, '$.b' RETURNING ARRAY<INT>) AS b FROM docs;
-- case: arrays_as_json
SELECT id, JSON_STRING(JSON_QUERY(doc, '$.b' RETURNING ARRAY<STRING>)) AS s, JSON_OBJECT('b' VALUE JSON_QUERY(doc, 'lax $.*' RETURNING ARRAY<STRING>)) AS o FROM docs WHERE id IN (1, 9, 12, 16);
-- case: arrayagg_legacy_tumble
SELECT TUMBLE_START(ts, INTERVAL '10' SECOND) AS s, JSON_ARRAYAGG(kind) AS kinds FROM events GROUP BY TUMBLE(ts, INTERVAL '10' SECOND);
-- case: objectagg_over_updating_input
SELECT JSON_OBJECTAGG(KEY CAST(uid AS STRING) VALUE c) AS counts FROM (SELECT uid, COUNT(*) AS c FROM events WHERE uid IS NOT NULL GROUP BY uid);
-- case: objectagg_retracting_a_null_value
SELECT JSON_OBJECTAGG(KEY CAST(uid AS STRING) VALUE CASE WHEN c > 100 THEN c END) AS counts FROM (SELECT uid, COUNT(*) AS c FROM events WHERE uid IS NOT NULL GROUP BY uid);
