"""Kafka Connect's sink connectors, run by streamsql itself.

ksqlDB users declare sinks with ``CREATE SINK CONNECTOR name WITH ('connector.class' = …)`` and
Kafka Connect's configuration keys; ksqlDB hands the statement to a Connect cluster. streamsql
needs no Connect cluster: each sink connector is a Spark streaming query that reads its topics
and writes every micro-batch to the external system from the executors (``foreachPartition``),
checkpointing the topics' offsets as any persistent query does.

* ``config``: the keys every sink takes (``topics``, converters, ``errors.*``), the connector
  classes streamsql knows, and validation whose errors name the key.
* ``converters``: Connect's key/value converters as decoders of raw Kafka bytes.
* ``elasticsearch``: Confluent's Elasticsearch sink (also OpenSearch) over the bulk API.
* ``s3``: Confluent's S3 sink (S3-compatible servers, or a local directory).
* ``file``: Kafka's FileStreamSink (lines appended to a file).
"""
