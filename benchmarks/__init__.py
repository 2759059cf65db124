"""streamsql's benchmark harness: ``python -m benchmarks [--quick] [--json PATH]``.

One run starts one embedded broker, produces each workload's deterministic input once into one
topic, and measures every system against that same topic: streamsql end to end, two bare
confluent-kafka consume loops (the ceilings) and a peer engine (Quix Streams). See README.md.
"""
