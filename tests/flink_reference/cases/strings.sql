-- String functions over NULL, '' (JSON), unicode and out-of-range positions.

-- case: upper_lower
SELECT id, UPPER(s) AS u, LOWER(s) AS l FROM strs;
-- case: char_length
SELECT id, CHAR_LENGTH(s) AS n, CHARACTER_LENGTH(s) AS n2 FROM strs;
-- case: concat_operator
SELECT id, s || '!' AS x FROM strs;
-- case: concat_function_null
SELECT id, CONCAT(s, '-', CAST(n AS STRING)) AS x FROM strs;
-- case: concat_ws_skips_null
SELECT id, CONCAT_WS('|', s, CAST(n AS STRING), 'z') AS x FROM strs;
-- case: substring_from
SELECT id, SUBSTRING(s FROM 3) AS x FROM strs;
-- case: substring_from_for
SELECT id, SUBSTRING(s FROM 2 FOR 3) AS x FROM strs;
-- case: substring_zero_start
SELECT id, SUBSTRING(s, 0, 3) AS x FROM strs WHERE id IN (1, 5, 6);
-- case: substring_negative_start
SELECT id, SUBSTRING(s, -3) AS x, SUBSTRING(s, -3, 2) AS y FROM strs WHERE id IN (1, 5, 6, 7);
-- case: substring_past_end
SELECT id, SUBSTRING(s, 50) AS x, SUBSTR(s, 2, 100) AS y FROM strs WHERE id IN (1, 2, 6);
-- case: substr_function
SELECT id, SUBSTR(s, 2) AS x FROM strs;
-- case: trim_both
SELECT id, TRIM(s) AS t, CHAR_LENGTH(TRIM(s)) AS n FROM strs WHERE id IN (1, 2, 3, 4);
-- case: trim_leading_trailing_chars
SELECT id, TRIM(LEADING 'H' FROM s) AS a, TRIM(TRAILING 'd' FROM s) AS b, TRIM(BOTH 'A' FROM s) AS c FROM strs WHERE id IN (1, 13);
-- case: ltrim_rtrim
SELECT id, LTRIM(s) AS l, RTRIM(s) AS r FROM strs WHERE id IN (2, 3, 4);
-- case: replace
SELECT id, REPLACE(s, 'l', 'L') AS r FROM strs;
-- case: replace_empty_search
SELECT id, REPLACE(s, '', 'x') AS r FROM strs WHERE id IN (1, 2);
-- case: position
SELECT id, POSITION('l' IN s) AS p, POSITION('' IN s) AS e FROM strs;
-- case: locate
SELECT id, LOCATE('l', s) AS p, LOCATE('l', s, 4) AS q FROM strs WHERE id IN (1, 2, 3, 13);
-- case: lpad_rpad
SELECT id, LPAD(s, 8, '*') AS l, RPAD(s, 8, '*') AS r FROM strs;
-- case: lpad_truncates_and_empty_pad
SELECT id, LPAD(s, 3, 'ab') AS l, LPAD(s, 5, '') AS e, RPAD(s, -1, 'x') AS n FROM strs WHERE id IN (1, 2, 6);
-- case: initcap
SELECT id, INITCAP(s) AS i FROM strs;
-- case: reverse
SELECT id, REVERSE(s) AS r FROM strs;
-- case: repeat
SELECT id, REPEAT(s, 2) AS r, REPEAT(s, 0) AS z, REPEAT(s, -1) AS neg FROM strs WHERE id IN (1, 2, 3, 6);
-- case: left_right
SELECT id, LEFT(s, 3) AS l, RIGHT(s, 3) AS r FROM strs;
-- case: left_right_negative
SELECT id, LEFT(s, -1) AS l, RIGHT(s, 0) AS r FROM strs WHERE id IN (1, 2);
-- case: split_index
SELECT id, SPLIT_INDEX(s, ',', 0) AS a, SPLIT_INDEX(s, ',', 2) AS c, SPLIT_INDEX(s, ',', 9) AS z FROM strs WHERE id IN (1, 2, 3, 7);
-- case: regexp_extract
SELECT id, REGEXP_EXTRACT(s, '([a-z]+) ([A-Z][a-z]+)', 2) AS w FROM strs WHERE id IN (1, 5, 16);
-- case: regexp_extract_no_match
SELECT id, REGEXP_EXTRACT(s, '[0-9]+', 0) AS d FROM strs;
-- case: regexp_replace
SELECT id, REGEXP_REPLACE(s, '[aeiou]', '_') AS r FROM strs;
-- case: regexp_predicate
SELECT id, REGEXP(s, '^[0-9-]+$') AS r FROM strs;
-- case: ascii_chr
SELECT id, ASCII(s) AS a, CHR(n + 100) AS c FROM strs;
-- case: md5_sha
SELECT id, MD5(s) AS m, SHA1(s) AS s1, SHA256(s) AS s256 FROM strs WHERE id IN (1, 2, 3, 6);
-- case: sha2_bits
SELECT id, SHA2(s, 224) AS a, SHA2(s, 512) AS b FROM strs WHERE id IN (1, 5);
-- case: overlay
SELECT id, OVERLAY(s PLACING 'XY' FROM 2 FOR 3) AS o FROM strs WHERE id IN (1, 2, 6);
-- case: string_compare_unicode_order
SELECT id, s FROM strs WHERE s > 'Z' AND s < 'é';
-- case: upper_unicode_eszett
SELECT id, UPPER(s) AS u, CHAR_LENGTH(UPPER(s)) AS n FROM strs WHERE id = 5;
-- case: concat_string_number_implicit
SELECT id, 'n=' || CAST(n AS STRING) AS x FROM strs;
-- case: string_literals_types
SELECT 'abc' AS a, '' AS e, 'üñî' AS u FROM strs WHERE id = 1;
