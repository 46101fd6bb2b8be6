"""The reference with only upstream's owner rule (owner = layer_id % s)."""

from implementations.upstream_owner_rule.impl import UpstreamOwnerRuleImplementation

__all__ = ["UpstreamOwnerRuleImplementation"]
