"""xLLM's own planning code, compiled from a source tree (``implementation=xllm_native``).

The wing in three parts: ``tree`` (where each role lives, which manifest, the facts the harness may ask:
``tree.facts.tree_facts``), ``build`` (compile commands, cache, dependency watch, diagnosis) and ``runtime``
(the host process, the calls, the tensor library, a tree's own tests); ``impl`` is the implementation under
test over them.
"""

from typing import Any

__all__ = ["ROLE_CALLS", "XllmNativeImplementation", "call_role"]

ROLE_CALLS = frozenset({"state", "validation", "estimation", "speculative", "ownership", "worker", "master_layout",
                        "engine_layout", "activation", "groups", "allocation", "allocation_terms", "worker_checks",
                        "engine_options", "allocation_checks"})
"""What ``call_role`` calls (``roles``: each role of a compiled tree on its own; ``state`` and ``allocation_terms``:
how the manifest plays a role)."""


def call_role(impl, call: str, *args: Any, **kwargs: Any) -> Any:
    """``roles.<call>(impl, *args, **kwargs)``: one role of the tree the adapter ``impl`` built, called on its own
    with the inputs given (the spec's figures for what the other roles would compute), or how its manifest plays
    a role. What ``harness.departures.judge`` asks of a tree, role by role; ``ValueError`` for a name not in
    ``ROLE_CALLS``."""
    if call not in ROLE_CALLS:
        raise ValueError(f"call_role: {call!r} is none of {sorted(ROLE_CALLS)}")
    # roles imports the adapter: about 0.5 s that a module asking only ``tree.facts`` never needs
    from implementations.xllm_native import roles

    return getattr(roles, call)(impl, *args, **kwargs)


def __getattr__(name: str):
    # The adapter class is imported on first use: importing it costs about 0.5 s (``impl`` pulls the upstream
    # model and every part of the wing), which a harness module asking only ``tree.facts`` never needs.
    if name == "XllmNativeImplementation":
        from implementations.xllm_native.impl import XllmNativeImplementation

        return XllmNativeImplementation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
