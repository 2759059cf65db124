-- A pipeline and the records it must write, run by
--   streamsql test --sql statements.sql --input input.json --output output.json
CREATE STREAM pageviews (user_id STRING KEY, page STRING, duration_ms INT)
  WITH (kafka_topic='pageviews', value_format='JSON', partitions=1);

-- views of a second or more
CREATE STREAM long_views AS
  SELECT user_id, page, duration_ms FROM pageviews WHERE duration_ms >= 1000;

-- views per user and minute
CREATE TABLE views_per_minute AS
  SELECT user_id, COUNT(*) AS views FROM pageviews
  WINDOW TUMBLING (SIZE 1 MINUTE)
  GROUP BY user_id;
