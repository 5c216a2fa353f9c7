-- The Nexmark source tables for sqlstream: one flat table per event kind over one event stream.
-- run.py substitutes ${EVENTS_NUM} (events over all three kinds), ${TPS} (events per second;
-- it also spaces the event times, as in nexmark-flink) and ${RATE_LIMITED} ('false' emits at
-- full speed with the same event times: run.py --unthrottled and --memory). nexmark-flink
-- declares one `datagen` table with ROW columns and views over it; the three tables here have
-- the views' columns.
-- `dateTime` is quoted in all scripts: it is a reserved word in Flink 2.x (nexmark-flink's queries,
-- written for Flink 1.x, leave it bare).

CREATE TABLE person (
    id  BIGINT,
    name  VARCHAR,
    emailAddress  VARCHAR,
    creditCard  VARCHAR,
    city  VARCHAR,
    state  VARCHAR,
    `dateTime`  TIMESTAMP(3),
    extra  VARCHAR,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'nexmark',
    'kind' = 'person',
    'events.num' = '${EVENTS_NUM}',
    'first-event.rate' = '${TPS}',
    'next-event.rate' = '${TPS}',
    'rate.limited' = '${RATE_LIMITED}'
);

CREATE TABLE auction (
    id  BIGINT,
    itemName  VARCHAR,
    description  VARCHAR,
    initialBid  BIGINT,
    reserve  BIGINT,
    `dateTime`  TIMESTAMP(3),
    expires  TIMESTAMP(3),
    seller  BIGINT,
    category  BIGINT,
    extra  VARCHAR,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'nexmark',
    'kind' = 'auction',
    'events.num' = '${EVENTS_NUM}',
    'first-event.rate' = '${TPS}',
    'next-event.rate' = '${TPS}',
    'rate.limited' = '${RATE_LIMITED}'
);

CREATE TABLE bid (
    auction  BIGINT,
    bidder  BIGINT,
    price  BIGINT,
    channel  VARCHAR,
    url  VARCHAR,
    `dateTime`  TIMESTAMP(3),
    extra  VARCHAR,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'nexmark',
    'kind' = 'bid',
    'events.num' = '${EVENTS_NUM}',
    'first-event.rate' = '${TPS}',
    'next-event.rate' = '${TPS}',
    'rate.limited' = '${RATE_LIMITED}'
);
