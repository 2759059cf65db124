"""Steps run once per installation (``scripts/setup.sh``), above the engine: they may run it,
and nothing the engine imports imports them."""
