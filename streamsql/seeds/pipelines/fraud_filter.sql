-- Seed pipeline 002: flag payments that the scoring model thinks are likely fraud.
-- Input: JSON payments keyed by payment id, e.g.
--   {"accountId":"acct-17","amount":42.5,"currency":"GBP","merchant":"m-3","fraudProbability":0.91}
-- Run it:  streamsql demo        (embedded broker + sample data)
--          streamsql run queries/fraud_filter.sql --bootstrap-servers HOST:PORT

SET 'auto.offset.reset' = 'earliest';

CREATE STREAM payments (
    paymentId VARCHAR KEY,
    accountId VARCHAR,
    amount DOUBLE,
    currency VARCHAR,
    merchant VARCHAR,
    fraudProbability DOUBLE
) WITH (KAFKA_TOPIC = 'payments', VALUE_FORMAT = 'JSON', PARTITIONS = 2);

CREATE STREAM fraudulent_payments AS
    SELECT * FROM payments
    WHERE fraudProbability > 0.8
    EMIT CHANGES;
