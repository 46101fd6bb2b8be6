"""pytest plugin (registered as the ``lwsplit`` pytest11 entry point). Filled in by the runner/suites work."""
