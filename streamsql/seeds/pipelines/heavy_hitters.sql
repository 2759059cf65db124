-- Seed pipeline 000: the most frequent words in log lines, per minute.
-- Input: JSON log lines on topic 'log_lines', e.g.  {"service": "api", "msg": "GET /users 200 in 12ms"}
-- Uses the seed Python functions in udfs/: SPLIT_WORDS (udfs/text.py) and HEAVY_HITTERS (udfs/sketches.py).
-- Run it:  streamsql run queries/heavy_hitters.sql --bootstrap-servers HOST:PORT

SET 'auto.offset.reset' = 'earliest';

CREATE STREAM log_lines (service VARCHAR, msg VARCHAR)
    WITH (KAFKA_TOPIC = 'log_lines', VALUE_FORMAT = 'JSON', PARTITIONS = 1);

-- 1. The cutter: one row per (lower-cased) word of each line.
CREATE STREAM log_words WITH (KAFKA_TOPIC = 'log_words', VALUE_FORMAT = 'JSON') AS
    SELECT COALESCE(service, 'all') AS service, EXPLODE(SPLIT_WORDS(msg, TRUE)) AS word
    FROM log_lines
    EMIT CHANGES;

-- 2. Heavy hitters per service per 1-minute window: the 10 most frequent words with their
--    count-min estimates (never below the true count; memory per window is the sketch's size).
CREATE TABLE heavy_hitters WITH (KAFKA_TOPIC = 'heavy_hitters', VALUE_FORMAT = 'JSON') AS
    SELECT service, HEAVY_HITTERS(word, 10) AS top_words
    FROM log_words
    WINDOW TUMBLING (SIZE 1 MINUTE)
    GROUP BY service
    EMIT CHANGES;

-- 3. The exact sum per word per 1-minute window (what the sketch estimates).
CREATE TABLE word_counts WITH (KAFKA_TOPIC = 'word_counts', VALUE_FORMAT = 'JSON') AS
    SELECT word, COUNT(*) AS total
    FROM log_words
    WINDOW TUMBLING (SIZE 1 MINUTE)
    GROUP BY word
    EMIT CHANGES;

-- 4. The same counts as documents for a search server: one row per word per minute, shaped
--    {"name", "count", "time"}, keyed by word and minute (the document id). The sink connector
--    is queries/heavy_hitters_elasticsearch.sql.
CREATE TABLE word_count_docs WITH (KAFKA_TOPIC = 'word_count_docs', KEY_FORMAT = 'JSON', VALUE_FORMAT = 'JSON') AS
    SELECT word, ROWTIME - ROWTIME % 60000 AS minute,
           AS_VALUE(word) AS `name`, COUNT(*) AS `count`, AS_VALUE(ROWTIME - ROWTIME % 60000) AS `time`
    FROM log_words
    GROUP BY word, ROWTIME - ROWTIME % 60000
    EMIT CHANGES;
