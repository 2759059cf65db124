-- Seed pipeline 003: the cheapest quote of each search batch, and quotes per route per minute.
-- Input: each message is one search's quotes, a gzipped batch of DELIMITED lines, one quote per line:
--   LHR,IST,2020-08-01,169.99,Y,<quote uuid>,<batch uuid>,<epoch millis>
-- VALUE_COMPRESSION = 'GZIP' (a streamsql extension) reads every line of a batch as one row.
-- Sample input:  streamsql produce flights --topic cflight_searches --count 1000
-- Run it:  streamsql run queries/cheapest_flight.sql --bootstrap-servers HOST:PORT
-- Then:    SELECT * FROM cflight_cheapest WHERE batchuuid = '<batch uuid>';      (pull query)

SET 'auto.offset.reset' = 'earliest';

CREATE STREAM cflight_searches (
    origin VARCHAR,
    destination VARCHAR,
    departure_date VARCHAR,
    gbpprice DOUBLE,
    cabin VARCHAR,
    uuid VARCHAR,
    batchuuid VARCHAR,
    search_ts BIGINT
) WITH (KAFKA_TOPIC = 'cflight_searches', VALUE_FORMAT = 'DELIMITED', VALUE_COMPRESSION = 'GZIP',
        PARTITIONS = 1, TIMESTAMP = 'search_ts');

-- one row per search batch: its cheapest quote so far (updated with every quote)
CREATE TABLE cflight_cheapest AS
    SELECT batchuuid, MIN(gbpprice) AS cheapest_quote, COUNT(*) AS quotes
    FROM cflight_searches
    GROUP BY batchuuid
    EMIT CHANGES;

-- quotes per route per 1-minute tumbling window
CREATE TABLE cflight_route_minute WITH (KEY_FORMAT = 'JSON') AS
    SELECT origin, destination, COUNT(*) AS quotes, MIN(gbpprice) AS cheapest_quote
    FROM cflight_searches
    WINDOW TUMBLING (SIZE 1 MINUTE)
    GROUP BY origin, destination
    EMIT CHANGES;
