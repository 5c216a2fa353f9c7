-- User sessions: a session closes after 30 seconds without a click.
CREATE TABLE clicks (
    `user` STRING,
    page STRING,
    ts TIMESTAMP(3),
    WATERMARK FOR ts AS ts - INTERVAL '3' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = 'sql-examples/data/clicks.jsonl',
    'format' = 'json'
);

SELECT window_start, window_end, `user`,
       COUNT(*) AS clicks,
       COUNT(DISTINCT page) AS pages
FROM TABLE(SESSION(TABLE clicks PARTITION BY `user`, DESCRIPTOR(ts), INTERVAL '30' SECOND))
GROUP BY window_start, window_end, `user`;
