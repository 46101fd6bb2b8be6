"""Upstream xLLM's names for a layer's KV cache tensors and the harness's names for them (``harness/oracle/tensors.py``).

One table read by both sides that meet upstream's tensors: the native adapter (a tensor glue hands each tensor
over under its ``KVCache`` getter's name) and the engine-log check (``print_shapes`` prints one line per cache).
"""

from __future__ import annotations

TENSOR_NAMES = {"k": "k", "v": "v", "k_scale": "k_scale", "v_scale": "v_scale", "index": "index",
                "index_scale": "index_scale", "conv": "conv", "ssm": "recurrent"}
"""A tensor glue's names (upstream ``KVCache``'s getters) -> the harness's (``harness/oracle/tensors.py``)."""
TENSOR_NAMES_MLA = {**TENSOR_NAMES, "k": "latent", "v": "rope", "k_scale": "latent_scale", "v_scale": "rope_scale"}
"""An MLA model's: upstream keeps the latent in the key cache and the rope part in the value cache."""
PRINTED_CACHES = {"k": "k", "v": "v", "indexer": "index", "indexer cache scale": "index_scale", "conv": "conv",
                  "ssm": "ssm"}
"""A cache ``print_shapes`` prints a line for (``kv_cache_shape.cpp:184-205`` at 494f293b5) -> the getter of the
tensor it is."""


def harness_names(getter: str) -> tuple[str, ...]:
    """The harness's names of upstream's ``getter`` tensor: one, or two where an MLA model names it otherwise
    (``k``: ``k`` or ``latent``)."""
    return tuple(dict.fromkeys((TENSOR_NAMES[getter], TENSOR_NAMES_MLA[getter])))
