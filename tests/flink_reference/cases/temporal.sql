-- Date and time functions over TIMESTAMP(3) event times, DATE literals and intervals (UTC).

-- case: extract_fields
SELECT id, EXTRACT(YEAR FROM ts) AS y, EXTRACT(MONTH FROM ts) AS mo, EXTRACT(DAY FROM ts) AS d, EXTRACT(HOUR FROM ts) AS h, EXTRACT(MINUTE FROM ts) AS mi, EXTRACT(SECOND FROM ts) AS s FROM events WHERE id <= 5;
-- case: year_month_functions
SELECT id, YEAR(ts) AS y, QUARTER(ts) AS q, MONTH(ts) AS m, WEEK(ts) AS w, DAYOFYEAR(ts) AS dy, DAYOFMONTH(ts) AS dm, DAYOFWEEK(ts) AS dw FROM events WHERE id <= 3;
-- case: hour_minute_second
SELECT id, HOUR(ts) AS h, MINUTE(ts) AS m, SECOND(ts) AS s FROM events WHERE id <= 5;
-- case: date_format
SELECT id, DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss') AS a, DATE_FORMAT(ts, 'yyyy/MM/dd') AS b FROM events WHERE id <= 3;
-- case: date_format_millis
SELECT id, DATE_FORMAT(ts, 'HH:mm:ss.SSS') AS a FROM events WHERE id <= 3;
-- case: floor_ceil_to_unit
SELECT id, FLOOR(ts TO MINUTE) AS f, CEIL(ts TO MINUTE) AS c, FLOOR(ts TO HOUR) AS h FROM events WHERE id <= 5;
-- case: floor_to_day_month
SELECT id, FLOOR(ts TO DAY) AS d, FLOOR(ts TO MONTH) AS m, CEIL(ts TO DAY) AS cd FROM events WHERE id = 1;
-- case: timestamp_plus_interval
SELECT id, ts + INTERVAL '1' HOUR AS h, ts - INTERVAL '90' SECOND AS s FROM events WHERE id <= 3;
-- case: timestamp_plus_day_month_interval
SELECT id, ts + INTERVAL '1' DAY AS d, ts + INTERVAL '1' MONTH AS m FROM events WHERE id = 1;
-- case: timestampadd
SELECT id, TIMESTAMPADD(MINUTE, 5, ts) AS a, TIMESTAMPADD(DAY, -1, ts) AS b FROM events WHERE id <= 3;
-- case: timestampdiff
SELECT id, TIMESTAMPDIFF(SECOND, TIMESTAMP '2024-03-01 10:00:00', ts) AS s, TIMESTAMPDIFF(MINUTE, ts, TIMESTAMP '2024-03-01 10:00:00') AS m FROM events WHERE id <= 5;
-- case: timestampdiff_month_day
SELECT id, TIMESTAMPDIFF(DAY, TIMESTAMP '2024-02-01 00:00:00', ts) AS d, TIMESTAMPDIFF(MONTH, TIMESTAMP '2023-12-31 00:00:00', ts) AS m FROM events WHERE id = 1;
-- case: to_timestamp
SELECT id, TO_TIMESTAMP(s) AS t FROM strs WHERE id = 12;
-- case: to_timestamp_format
SELECT id, TO_TIMESTAMP(s, 'yyyy-MM-dd') AS t FROM strs WHERE id = 11;
-- case: to_timestamp_invalid_null
SELECT id, TO_TIMESTAMP(s) AS t FROM strs WHERE id IN (1, 2, 3);
-- case: to_date
SELECT id, TO_DATE(s) AS d FROM strs WHERE id = 11;
-- case: unix_timestamp_of_string
SELECT id, UNIX_TIMESTAMP(s) AS u FROM strs WHERE id = 12;
-- case: unix_timestamp_format
SELECT id, UNIX_TIMESTAMP(s, 'yyyy-MM-dd') AS u FROM strs WHERE id = 11;
-- case: from_unixtime
SELECT id, FROM_UNIXTIME(n * 100000) AS f FROM strs WHERE n IS NOT NULL;
-- case: from_unixtime_format
SELECT id, FROM_UNIXTIME(1709287200, 'yyyy-MM-dd HH:mm') AS f FROM strs WHERE id = 1;
-- case: to_timestamp_ltz_millis
SELECT id, TO_TIMESTAMP_LTZ(id * 1000, 3) AS t FROM events WHERE id <= 3;
-- case: date_literal_and_compare
SELECT id FROM events WHERE CAST(ts AS DATE) = DATE '2024-03-01' AND id <= 4;
-- case: timestamp_literal_compare
SELECT id FROM events WHERE ts < TIMESTAMP '2024-03-01 10:00:20';
-- case: date_plus_interval
SELECT id, DATE '2024-02-28' + INTERVAL '1' DAY AS d, DATE '2024-01-31' + INTERVAL '1' MONTH AS m FROM events WHERE id = 1;
-- case: extract_from_date
SELECT id, EXTRACT(DOW FROM DATE '2024-03-03') AS dow, EXTRACT(DOY FROM DATE '2024-12-31') AS doy FROM events WHERE id = 1;
-- case: timestamp_minus_timestamp_compare
SELECT o.order_id FROM orders AS o WHERE o.ts BETWEEN TIMESTAMP '2024-03-01 10:01:00' AND TIMESTAMP '2024-03-01 10:01:30';
-- case: date_format_null
SELECT id, DATE_FORMAT(TRY_CAST(s AS TIMESTAMP(3)), 'yyyy') AS y FROM strs;
