"""Benchmarks with printed tables; run each as ``python -m tools.bench.<name>``."""
