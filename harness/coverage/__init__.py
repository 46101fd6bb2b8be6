"""Coverage of the TC matrix, measured: which case catches a corruption of each reported fact.

``harness.coverage.fields``: one field mutant per field of ``KVPlan``, ``RankPlan``, ``DraftPlan``
and ``WorkerKVCache`` and per tensor property a worker exposes (``implementations.mutants.fields``),
run against the TC cases of the default matrix; the first case that catches each one is recorded
in ``field_catches.json`` and rendered in ``docs/coverage.md`` by ``python -m harness.coverage fields``.
"""
