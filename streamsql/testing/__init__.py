"""Conformance testing: ``streamsql test`` runs ksqlDB query-validation tests (see qtt.py)."""
