"""xLLM's own planning code, compiled from a source tree (``implementation=xllm_native``).

The wing in three parts: ``tree`` (where each role lives, which manifest, the facts the harness may ask:
``tree.facts.tree_facts``), ``build`` (compile commands, cache, dependency watch, diagnosis) and ``runtime``
(the host process, the calls, the tensor library, a tree's own tests); ``impl`` is the implementation under
test over them.
"""

__all__ = ["XllmNativeImplementation"]


def __getattr__(name: str):
    # The adapter class is imported on first use: importing it costs about 0.5 s (``impl`` pulls the upstream
    # model and every part of the wing), which a harness module asking only ``tree.facts`` never needs.
    if name == "XllmNativeImplementation":
        from implementations.xllm_native.impl import XllmNativeImplementation

        return XllmNativeImplementation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
