-- Seed pipeline 000, last step: each minute's heavy hitters (stream word_count_docs of
-- queries/heavy_hitters.sql) as documents {"name", "count", "time"} in Elasticsearch or OpenSearch,
-- ten per minute (id: minute+place, 1 to 10), overwritten as the minute's top 10 changes.
-- Run it once heavy_hitters.sql has created that stream, on the same broker, naming your server:
--   streamsql run queries/heavy_hitters_elasticsearch.sql --bootstrap-servers HOST:PORT \
--       --define elasticsearch_url=http://localhost:9200

CREATE SINK CONNECTOR word_counts_elasticsearch WITH (
    'connector.class'                = 'io.confluent.connect.elasticsearch.ElasticsearchSinkConnector',
    'connection.url'                 = '${elasticsearch_url}',
    'topics'                         = 'word_count_docs',
    'key.converter'                  = 'org.apache.kafka.connect.json.JsonConverter',
    'key.converter.schemas.enable'   = 'false',
    'value.converter'                = 'org.apache.kafka.connect.json.JsonConverter',
    'value.converter.schemas.enable' = 'false',
    'key.ignore'                     = 'false',
    'schema.ignore'                  = 'true',
    'behavior.on.null.values'        = 'delete',
    'max.retries'                    = '10'
);
