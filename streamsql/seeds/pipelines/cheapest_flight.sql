-- Seed pipeline 003: flight searches as the search service writes them, enriched, and the
-- cheapest quote of each search batch.
-- Input: each message is one search, a gzipped batch of CSV lines, one quote per line
--   (origin, destination, date, price in GBP, cabin class):   LHR,IST,2020-08-01,169.99,Y
-- The transform step (in SQL below) gives every line its own uuid, the batch's uuid and the
-- batch's timestamp, and gzips the enriched batch again, one message per search:
--   LHR,IST,2020-08-01,169.99,Y,<line uuid>,<batch uuid>,2020-08-01T09:00:00
-- The ids are deterministic: the batch uuid comes from the message's partition and offset, a
-- line's uuid from the batch uuid and the line's position, both as the UUID-formatted MD5 of that
-- text; the batch timestamp is the message's (ROWTIME, UTC). So a replay after a crash, or a run
-- of the same topic elsewhere, writes the same ids.
-- Sample input:  streamsql produce flights --topic cflight_searches --count 1000
-- Run it:  streamsql run queries/cheapest_flight.sql --bootstrap-servers HOST:PORT
-- Then:    SELECT * FROM cflight_cheapest WHERE batchuuid = '<batch uuid>';      (pull query)
-- To S3 (the enriched batches and the cheapest quotes): queries/cheapest_flight_s3.sql

SET 'auto.offset.reset' = 'earliest';

-- the searches as they come: one gzipped batch of CSV lines per message
CREATE STREAM cflight_searches (payload BYTES)
    WITH (KAFKA_TOPIC = 'cflight_searches', VALUE_FORMAT = 'KAFKA', PARTITIONS = 1);

-- transform, 1: each batch's non-empty lines, its uuid and its timestamp
CREATE STREAM cflight_batches WITH (KAFKA_TOPIC = 'cflight_batches', VALUE_FORMAT = 'JSON') AS
    SELECT UUID(TO_BYTES(MD5(CONCAT('cflight_searches/', CAST(ROWPARTITION AS VARCHAR), '/',
                                    CAST(ROWOFFSET AS VARCHAR))), 'hex')) AS batchuuid,
           FORMAT_TIMESTAMP(FROM_UNIXTIME(ROWTIME), 'yyyy-MM-dd''T''HH:mm:ss', 'UTC') AS batch_timestamp,
           FILTER(SPLIT(GUNZIP(payload), CHR(10)), line => TRIM(line) <> '') AS lines
    FROM cflight_searches
    EMIT CHANGES;

-- transform, 2: every line with its uuid, the batch uuid and the timestamp appended, the enriched
-- batch gzipped (the compressor's input: queries/cheapest_flight_s3.sql writes each to S3)
CREATE STREAM cflight_enriched WITH (KAFKA_TOPIC = 'cflight_enriched', VALUE_FORMAT = 'KAFKA') AS
    SELECT GZIP(ARRAY_JOIN(TRANSFORM(GENERATE_SERIES(1, ARRAY_LENGTH(lines)),
               i => CONCAT_WS(',', lines[i],
                              UUID(TO_BYTES(MD5(CONCAT(batchuuid, '/', CAST(i AS VARCHAR))), 'hex')),
                              batchuuid, batch_timestamp)), CHR(10))) AS batch
    FROM cflight_batches
    WHERE ARRAY_LENGTH(lines) > 0
    EMIT CHANGES;

-- the enriched quotes, one row per line (the talk's Avro record's fields); a line that does not
-- have five fields, or whose price is not a number, goes to the processing log
CREATE STREAM cflight_quotes (
    depiata VARCHAR,
    arriata VARCHAR,
    searchdate VARCHAR,
    gbpprice DOUBLE,
    paxclass VARCHAR,
    uuid VARCHAR,
    batchuuid VARCHAR,
    `timestamp` VARCHAR
) WITH (KAFKA_TOPIC = 'cflight_enriched', VALUE_FORMAT = 'DELIMITED', VALUE_COMPRESSION = 'GZIP');

-- one row per search batch: its cheapest quote and number of quotes, keyed and valued with its uuid
CREATE TABLE cflight_cheapest WITH (KAFKA_TOPIC = 'cflight_cheapest') AS
    SELECT batchuuid, AS_VALUE(batchuuid) AS batch_uuid, MIN(gbpprice) AS cheapest_quote, COUNT(*) AS quotes
    FROM cflight_quotes
    GROUP BY batchuuid
    EMIT CHANGES;
