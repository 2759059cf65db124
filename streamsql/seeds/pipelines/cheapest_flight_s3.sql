-- Seed pipeline 003 to S3: the cheapest quote of each search batch as Avro objects, and the
-- gzipped search batches themselves, byte for byte, one object per batch (a .csv.gz file each),
-- in Kafka Connect's S3 sink layout: <dir>/<topic>/partition=<p>/<topic>+<p>+<first offset>.<ext>.
-- Needs a Schema Registry (ksql.schema.registry.url in the properties file) for the Avro table,
-- an S3-compatible server and a bucket 'seed-003'; credentials from AWS_ACCESS_KEY_ID /
-- AWS_SECRET_ACCESS_KEY. Input: streamsql produce flights --topic cflight_searches
-- Run it:  streamsql run queries/cheapest_flight_s3.sql --config streamsql.properties \
--              --define s3_url=http://localhost:9000 --define schema_registry_url=http://localhost:8081

SET 'auto.offset.reset' = 'earliest';

CREATE STREAM cflight_searches_s3 (
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

-- the cheapest quote per search batch, Avro-encoded (its schema in the registry)
CREATE TABLE cflight_cheapest_avro WITH (KAFKA_TOPIC = 'cflight_cheapest_avro', VALUE_FORMAT = 'AVRO') AS
    SELECT batchuuid, MIN(gbpprice) AS cheapest_quote, COUNT(*) AS quotes
    FROM cflight_searches_s3
    GROUP BY batchuuid
    EMIT CHANGES;

CREATE SINK CONNECTOR cheapest_quotes_s3 WITH (
    'connector.class'                     = 'io.confluent.connect.s3.S3SinkConnector',
    'topics'                              = 'cflight_cheapest_avro',
    's3.bucket.name'                      = 'seed-003',
    's3.region'                           = 'us-east-1',
    'store.url'                           = '${s3_url}',
    'format.class'                        = 'io.confluent.connect.s3.format.avro.AvroFormat',
    'value.converter'                     = 'io.confluent.connect.avro.AvroConverter',
    'value.converter.schema.registry.url' = '${schema_registry_url}',
    'flush.size'                          = '1000'
);

-- the batch compressor's output: each gzipped batch as it came, one object per batch
CREATE SINK CONNECTOR search_batches_s3 WITH (
    'connector.class'            = 'io.confluent.connect.s3.S3SinkConnector',
    'topics'                     = 'cflight_searches',
    's3.bucket.name'             = 'seed-003',
    's3.region'                  = 'us-east-1',
    'store.url'                  = '${s3_url}',
    'format.class'               = 'io.confluent.connect.s3.format.bytearray.ByteArrayFormat',
    'format.bytearray.separator' = '',
    'format.bytearray.extension' = '.csv.gz',
    'topics.dir'                 = 'batches',
    'flush.size'                 = '1'
);
