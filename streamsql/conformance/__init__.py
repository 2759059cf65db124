"""``streamsql test``: ksqlDB's query-validation tests (QTT) and REST query-validation tests
(RQTT) run against the real engine, the way users run their own ``.sql`` files in CI.

One module per stage of a case: ``cases`` reads the files, ``topics`` isolates a case's topics
and declares its schemas, ``records`` encodes its inputs and decodes outputs, ``compare`` and
``expectations`` judge what it produced, ``qtt`` runs cases on engines over one broker and one
SparkSession, ``results`` reports them; ``rqtt`` runs REST cases through a real server.
"""
