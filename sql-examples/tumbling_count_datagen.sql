-- Clicks per user in 10-second tumbling windows, from the built-in data generator.
-- The event time is derived from a sequence, so every run prints the same windows.
CREATE TABLE clicks (
    user_id INT,
    url STRING,
    seq BIGINT,
    ts AS TO_TIMESTAMP_LTZ(1714550400000 + seq * 250, 3),
    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (
    'connector' = 'datagen',
    'rows-per-second' = '100000',
    'fields.user_id.min' = '1',
    'fields.user_id.max' = '3',
    'fields.url.length' = '6',
    'fields.seq.kind' = 'sequence',
    'fields.seq.start' = '0',
    'fields.seq.end' = '399',
    'seed' = '42'
);

CREATE TABLE clicks_per_window (
    window_start TIMESTAMP(3),
    window_end TIMESTAMP(3),
    user_id INT,
    clicks BIGINT
) WITH ('connector' = 'print');

INSERT INTO clicks_per_window
SELECT window_start, window_end, user_id, COUNT(*) AS clicks
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, user_id;
