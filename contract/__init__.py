"""The contract the harness and every implementation share: the Protocol, specs, plan types, errors, units,
the outside text formats both read, and the bounded readers of user input. Imports nothing from ``harness/`` or
``implementations/``."""
