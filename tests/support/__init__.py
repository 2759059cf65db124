"""Helpers only the tests use (not part of the product)."""
