"""Benchmarks with printed tables; run each as ``python -m harness.bench.<name>``."""
