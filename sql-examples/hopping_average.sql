-- Average temperature per sensor over 1-minute windows sliding every 20 seconds.
CREATE TABLE readings (
    sensor STRING,
    temperature DOUBLE,
    ts TIMESTAMP(3),
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = 'sql-examples/data/sensors.csv',
    'format' = 'csv'
);

SELECT window_start, window_end, sensor,
       ROUND(AVG(temperature), 2) AS avg_temperature,
       COUNT(*) AS readings
FROM TABLE(HOP(TABLE readings, DESCRIPTOR(ts), INTERVAL '20' SECOND, INTERVAL '1' MINUTE))
GROUP BY window_start, window_end, sensor;
