-- Seed pipeline 003 to S3: each enriched search batch, gzipped, as its own object (a .csv.gz
-- file), and the cheapest quote of each batch as Avro objects (with its batch uuid), in Kafka
-- Connect's S3 sink layout: <dir>/<topic>/partition=<p>/<topic>+<p>+<first offset>.<ext>.
-- Reads topic cflight_enriched, which queries/cheapest_flight.sql writes: run that first.
-- Needs a Schema Registry (ksql.schema.registry.url in the properties file) for the Avro table,
-- an S3-compatible server and a bucket 'seed-003'; credentials from AWS_ACCESS_KEY_ID /
-- AWS_SECRET_ACCESS_KEY.
-- Run it:  streamsql run queries/cheapest_flight_s3.sql --config streamsql.properties \
--              --define s3_url=http://localhost:9000 --define schema_registry_url=http://localhost:8081

SET 'auto.offset.reset' = 'earliest';

-- the enriched quotes (see queries/cheapest_flight.sql), one row per line of each gzipped batch
CREATE STREAM cflight_quotes_s3 (
    depiata VARCHAR,
    arriata VARCHAR,
    searchdate VARCHAR,
    gbpprice DOUBLE,
    paxclass VARCHAR,
    uuid VARCHAR,
    batchuuid VARCHAR,
    `timestamp` VARCHAR
) WITH (KAFKA_TOPIC = 'cflight_enriched', VALUE_FORMAT = 'DELIMITED', VALUE_COMPRESSION = 'GZIP');

-- the cheapest quote per search batch, Avro-encoded (its schema in the registry); the batch uuid
-- is in the value too, so each object's records name their batch
CREATE TABLE cflight_cheapest_avro WITH (KAFKA_TOPIC = 'cflight_cheapest_avro', VALUE_FORMAT = 'AVRO') AS
    SELECT batchuuid, AS_VALUE(batchuuid) AS batch_uuid, MIN(gbpprice) AS cheapest_quote, COUNT(*) AS quotes
    FROM cflight_quotes_s3
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

-- the compressor's output: each enriched batch, gzipped, one object per batch
CREATE SINK CONNECTOR enriched_batches_s3 WITH (
    'connector.class'            = 'io.confluent.connect.s3.S3SinkConnector',
    'topics'                     = 'cflight_enriched',
    's3.bucket.name'             = 'seed-003',
    's3.region'                  = 'us-east-1',
    'store.url'                  = '${s3_url}',
    'format.class'               = 'io.confluent.connect.s3.format.bytearray.ByteArrayFormat',
    'format.bytearray.separator' = '',
    'format.bytearray.extension' = '.csv.gz',
    'topics.dir'                 = 'batches',
    'flush.size'                 = '1'
);
