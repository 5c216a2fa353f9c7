-- Query 2: selection. The bids on every 123rd auction (the original query's fixed list of auction
-- ids would select only a few hundred rows from any stream).
CREATE TABLE nexmark_q2 (
  auction  BIGINT,
  price  BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q2
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
