"""``enable_layerwise_split`` / ``layerwise_split_size`` from the three places they come from.

The parsing lives in the neutral ``contract.server_flags`` (the harness reads the
same spellings); this module keeps the reference's names for it. Parsing only checks
spelling; the rules on the values are in ``validation``.
"""

from __future__ import annotations

from contract.server_flags import (  # noqa: F401  (the reference's names for the shared parsing)
    BOOL_ALLOWED,
    ENABLE_FLAG,
    FALSE_WORDS,
    INT_ALLOWED,
    SIZE_FLAG,
    TRUE_WORDS,
    flags_from_gflags,
    flags_from_parallel_config_json,
    flags_from_values,
    parse_bool,
)
