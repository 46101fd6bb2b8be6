"""Property-based exploration of configurations (FEATURE sections 3 to 8).

A hand-written matrix covers the configurations someone thought of; the explorer draws
configurations within real bounds (``strategies``: valid by construction, and a deliberate share of
refusals; ``reach`` names what each one reaches), runs an implementation on each
in-process (``runner``: ``plan``, ``engine_message`` and ``init_worker`` of every rank on
the CPU, no process group), and judges the result with the TCs' own check functions and
the ownership properties (``properties``) against ``harness.oracle``. A failure shrinks to
a minimal configuration, written as a spec file that a printed ``python -m harness.plan
--run-spec`` command plans (``reproduce``). ``search.explore`` drives it; ``testcases/explore`` and
``python -m tools.bench.explore`` share it.
"""
