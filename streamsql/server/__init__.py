"""The ksqlDB-compatible REST server (``streamsql server``)."""
