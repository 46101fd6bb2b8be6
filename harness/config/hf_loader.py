"""A local Hugging Face ``config.json`` -> ``specs.ModelSpec``.

Plain JSON (bounded: contract.bounded_inputs) of a local file: no ``trust_remote_code``, no imports of model
code, no network. Multimodal configs (Qwen3.5) keep the language model's numbers
in ``text_config``; those are read from there, ``model_type`` from the top.
Every mistake is a ``ConfigError`` naming the JSON key and the expected type.

Keys read (every one the byte formulas use): ``model_type``, ``num_hidden_layers``,
``head_dim`` (else ``hidden_size / num_attention_heads``), ``num_attention_heads``,
``num_key_value_heads`` (at most ``num_attention_heads``: GQA shares KV heads among query
heads, so more KV heads than query heads is a broken config, refused naming both),
``torch_dtype`` (or ``dtype``), ``layer_types``,
``full_attention_interval``, ``linear_num_key_heads``, ``linear_num_value_heads``,
``linear_key_head_dim``, ``linear_value_head_dim``, ``linear_conv_kernel_dim``,
``mamba_ssm_dtype``, ``index_n_heads``, ``index_head_dim``, ``kv_lora_rank``,
``qk_rope_head_dim``, ``num_nextn_predict_layers``. Whether layerwise split
supports the model is the implementation's rule (by ``model_type``), not the loader's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Union

from contract import bounded_inputs
from contract.errors import ConfigError
from contract.specs import DTYPE_BYTES, ModelSpec

MAX_CONFIG_BYTES = bounded_inputs.MAX_FILE_BYTES
"""A config.json is a few KiB; refuse to read anything this large."""
FIELD = "model_path"

_OPTIONAL_INTS = (
    "index_n_heads",
    "index_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "num_attention_heads",
    "num_nextn_predict_layers",
)
SSM_DTYPES = ("bfloat16", "float16", "float32")


def load_config_json(path: Union[str, Path], field: str = FIELD) -> dict:
    """The JSON object of a config.json (or of ``<dir>/config.json``); errors name ``field``.

    Read through ``contract.bounded_inputs``: a regular file of bounded size (a FIFO or
    device is refused unread), bounded nesting and integer size, no NaN.
    """
    path = Path(path).expanduser()
    allowed = "an existing local config.json (or a directory holding one)"
    try:
        if path.is_dir():
            path = path / "config.json"
        if not path.exists():
            raise ConfigError(field, str(path), allowed)
    except OSError as exc:  # a name past the system's limits (ENAMETOOLONG), a folder it may not search
        raise ConfigError(field, str(path), allowed, exc.strerror or type(exc).__name__) from None
    text = bounded_inputs.read_input_file(path, field, max_bytes=MAX_CONFIG_BYTES)
    obj = bounded_inputs.loads_json(text, field, source=str(path))
    if not isinstance(obj, dict):
        raise ConfigError(field, str(path), "a JSON object at the top level", f"got {type(obj).__name__}")
    return obj


def model_spec_from_hf_config(path: Union[str, Path], field: str = FIELD) -> ModelSpec:
    """Parse a local config.json into a ``ModelSpec`` named by its path (``field``: model_path or draft_path)."""
    return model_spec_from_dict(load_config_json(path, field), name=str(path))


def model_spec_from_dict(obj: Mapping[str, Any], *, name: str) -> ModelSpec:
    """The mapping of model_type, layers, attention, indexer and linear-attention keys."""
    reader = _Reader(obj, name)
    model_type = reader.string("model_type", required=True)
    text = obj.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" not in obj:
        reader = _Reader(text, name, prefix="text_config.")
    num_layers = reader.integer("num_hidden_layers", required=True, minimum=1)
    if num_layers > bounded_inputs.MAX_LAYERS:
        raise reader.error("num_hidden_layers", num_layers, f"at most {bounded_inputs.MAX_LAYERS} (layers per model)")

    kv_lora_rank = reader.integer("kv_lora_rank", minimum=0) or 0
    fields: dict[str, Any] = {}
    if kv_lora_rank > 0:
        fields.update(
            attention="mla",
            kv_lora_rank=kv_lora_rank,
            qk_rope_head_dim=reader.integer("qk_rope_head_dim", required=True, minimum=0),
        )
    else:
        fields.update(attention="gqa", head_dim=_head_dim(reader), num_key_value_heads=_kv_heads(reader))

    for key in _OPTIONAL_INTS:
        value = reader.integer(key, minimum=0)
        if value is not None:
            fields[key] = value
    if "num_nextn_predict_layers" not in fields:  # Qwen3.5 names its MTP layers so (upstream qwen3_5.h)
        mtp = reader.integer("mtp_num_hidden_layers", minimum=0)
        if mtp is not None:
            fields["num_nextn_predict_layers"] = mtp
    if fields.get("index_n_heads", 0) > 0:
        reader.integer("index_head_dim", required=True, minimum=1)
    interval = reader.integer("full_attention_interval", minimum=1)
    if interval is not None:
        fields["full_attention_interval"] = interval
    layer_types = reader.string_list("layer_types")
    if layer_types is not None:
        if len(layer_types) != num_layers:
            raise reader.error("layer_types", layer_types[:4], f"a list of {num_layers} strings (num_hidden_layers)")
        fields["layer_types"] = tuple(layer_types)
    ssm_dtype = reader.string("mamba_ssm_dtype")
    if ssm_dtype is not None:
        if ssm_dtype not in SSM_DTYPES:
            raise reader.error("mamba_ssm_dtype", ssm_dtype, f"one of {', '.join(SSM_DTYPES)}")
        fields["mamba_ssm_dtype"] = ssm_dtype

    return ModelSpec(
        name=name,
        model_type=model_type,
        num_hidden_layers=num_layers,
        dtype=_dtype(reader, _Reader(obj, name)),
        **fields,
    )


def _head_dim(reader: _Reader) -> int:
    head_dim = reader.integer("head_dim", minimum=1)
    if head_dim is not None:
        return head_dim
    hidden = reader.integer("hidden_size", required=True, minimum=1)
    heads = reader.integer("num_attention_heads", required=True, minimum=1)
    return hidden // heads


def _kv_heads(reader: _Reader) -> int:
    kv_heads = reader.integer("num_key_value_heads", minimum=1)
    if kv_heads is not None:
        heads = reader.integer("num_attention_heads", minimum=1)
        if heads is not None and kv_heads > heads:  # GQA groups query heads: never more KV heads than query heads
            raise reader.error("num_key_value_heads", kv_heads,
                               f"at most num_attention_heads {heads} (KV heads {kv_heads} > query heads {heads})")
        return kv_heads
    return reader.integer("num_attention_heads", required=True, minimum=1)  # MHA, as transformers defaults


def _dtype(reader: _Reader, top: _Reader) -> str:
    """``torch_dtype`` (or ``dtype``, newer transformers); absent means bfloat16, the harness default."""
    for r in (reader, top):
        for key in ("torch_dtype", "dtype"):
            value = r.string(key)
            if value is not None:
                if value not in DTYPE_BYTES:
                    raise r.error(key, value, f"one of {', '.join(DTYPE_BYTES)}")
                return value
    return "bfloat16"


class _Reader:
    """Typed access to one JSON object; errors name ``<prefix><key>`` and the file."""

    def __init__(self, obj: Mapping[str, Any], name: str, prefix: str = "") -> None:
        self.obj, self.name, self.prefix = obj, name, prefix

    def error(self, key: str, value: object, allowed: str) -> ConfigError:
        return ConfigError(f"{self.prefix}{key}", value, allowed, f"in {self.name}")

    def _get(self, key: str, required: bool, expected: str) -> Any:
        value = self.obj.get(key)
        if value is None and required:
            raise self.error(key, None, f"required: {expected}")
        return value

    def integer(self, key: str, *, required: bool = False, minimum: int = 0) -> Optional[int]:
        expected = f"an integer >= {minimum}"
        value = self._get(key, required, expected)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(key, value, f"must be {expected}")
        return value

    def string(self, key: str, *, required: bool = False) -> Optional[str]:
        value = self._get(key, required, "a string")
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(key, value, "must be a non-empty string")
        return value

    def string_list(self, key: str) -> Optional[list[str]]:
        value = self._get(key, False, "a list of strings")
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, value if not isinstance(value, list) else value[:4], "must be a list of strings")
        return value
