"""Recorded baselines with their provenance (README.md) and the recorder of the native one."""
