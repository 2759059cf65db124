-- Seed pipeline 000, last step: the per-word counts per minute (table word_count_docs of
-- queries/heavy_hitters.sql) as documents {"name", "count", "time"} in Elasticsearch or OpenSearch,
-- one per word per minute (id: word+minute), updated as the count grows.
-- Run it once heavy_hitters.sql has created that table, on the same broker, naming your server:
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
