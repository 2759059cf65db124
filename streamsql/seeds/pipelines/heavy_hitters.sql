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

-- 3. The heavy hitters of every line per 1-minute window, whatever its service: one count-min
--    sketch (HEAVY_HITTERS) per window and its top 10 words with their estimates (never below
--    the true count). The window aggregate the search documents come from.
CREATE TABLE top_words WITH (KAFKA_TOPIC = 'top_words', VALUE_FORMAT = 'JSON') AS
    SELECT 'all' AS scope, HEAVY_HITTERS(word, 10) AS top_words
    FROM log_words
    WINDOW TUMBLING (SIZE 1 MINUTE)
    GROUP BY 'all'
    EMIT CHANGES;

-- 4. Each change of a window's top 10 as a stream (the table's topic read as events), cut into one
--    row per place: 1 for the most frequent word, 2 for the next... (the two EXPLODEs are zipped).
CREATE STREAM top_words_changes (scope VARCHAR KEY, top_words ARRAY<STRUCT<ITEM VARCHAR, ESTIMATE BIGINT>>)
    WITH (KAFKA_TOPIC = 'top_words', VALUE_FORMAT = 'JSON', WINDOW_TYPE = 'TUMBLING', WINDOW_SIZE = '1 MINUTE');

CREATE STREAM top_word_places WITH (KAFKA_TOPIC = 'top_word_places', VALUE_FORMAT = 'JSON') AS
    SELECT scope, WINDOWSTART AS minute, WINDOWSTART AS window_start,
           EXPLODE(GENERATE_SERIES(1, ARRAY_LENGTH(top_words))) AS place, EXPLODE(top_words) AS hit
    FROM top_words_changes
    EMIT CHANGES;

-- 5. The documents for a search server, shaped {"name", "count", "time"} (time: the window's start,
--    epoch milliseconds) and keyed by minute and place, the document id ("<minute>+<place>"): each
--    change of a window's top 10 overwrites its 10 documents, so per window the index holds exactly
--    the final top 10 and a word that drops out of it is gone. The sink connector is
--    queries/heavy_hitters_elasticsearch.sql.
CREATE STREAM word_count_docs WITH (KAFKA_TOPIC = 'word_count_docs', KEY_FORMAT = 'JSON', VALUE_FORMAT = 'JSON') AS
    SELECT minute, place, hit->ITEM AS `name`, hit->ESTIMATE AS `count`, window_start AS `time`
    FROM top_word_places
    PARTITION BY minute, place
    EMIT CHANGES;
