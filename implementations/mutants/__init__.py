"""Deliberately broken implementations: the reference with exactly one rule changed.

Each mutant subclasses ``ReferenceImplementation`` (through ``base.Mutant``),
overrides the smallest method that reaches its rule, and is selectable as
``implementation=mutant_<name>`` (``conf/implementation/mutant_<name>.yaml``, generated from ``MUTANTS``
by ``python -m harness.coverage mutant-configs``; ``harness/coverage/rules.py`` names each one's rule).
The meta-suite runs the TC suites against every entry of ``MUTANTS`` to show
each one is caught. Class docstring = ``rule``; see also ``component`` and
``expected_catchers``.
"""

from __future__ import annotations

from implementations.mutants.allocation import (
    ConvStateTransposed,
    ConvValueChannelsValueDim,
    NonownerRealStorage,
    QuantizedViewReshaped,
    WrongLayoutAxes,
)
from implementations.mutants.base import COMPONENTS, Mutant
from implementations.mutants.engine import DraftKeepsSplit, DraftLeaksStorage, DraftMessageSplitFields
from implementations.mutants.estimation import (
    CapacityGainInfinite,
    CapacityGainInverted,
    DraftAdditionalIgnored,
    DraftBodyTp1Ignored,
    DraftIndexFromTarget,
    DraftOwnShape,
    FixedSlotsUnpadded,
    GqaHeadsNotDivided,
    IndexSlotDropped,
    Int8IndexScaleMissing,
    LinearSlotsUnpadded,
    MaxBlockCount,
    MeanRounded,
    MlaRopeDropped,
    NoScratchInEstimate,
    PeakScratchOmitted,
    PrefixCacheIgnored,
    RaisesPeakUnnoted,
    SavingsAtUniformBlocks,
    ScaleBytesMissing,
    ScaleMissingInEstimate,
    SlotCapUnchecked,
    SpeculativeStateIgnored,
    SsmDtypeIgnored,
    UniformIgnoresDraft,
)
from implementations.mutants.fields import LABELS, field_ids
from implementations.mutants.flags import DisabledStillSplits
from implementations.mutants.layout import AttentionSpellingLinear, IntervalOffByOne, LinearSplit, OwnerOffByOne
from implementations.mutants.topology import (
    CardCheckSkipped,
    CardCheckWithoutDraft,
    CrossNodeLinksFromCardMatrix,
    FirstReplicaGroupingReused,
    GroupSearchInCardOrder,
    ReserveOncePerCard,
    StridedGroups,
    TieGroupsReshuffled,
    TieKeepsConsecutive,
)
from implementations.mutants.validation import (
    CpSplitAccepted,
    HostCacheWrongField,
    Int8IndexerTargetOnly,
    KvSplitAccepted,
    LinearWithIndexerAccepted,
    NoValidationUnsupported,
    QuantizedCacheAccepted,
    SleepModeAccepted,
    SplitSizeAgainstWorld,
    SplitSizeBelowOneAccepted,
    TpModSBeforeModelType,
    WorldRemainderDropped,
    XtensorAccepted,
)
from implementations.mutants.worker import DigestUnchecked, QuantizedRefusedByWorker, SplitRankModS

_CLASSES: tuple[type[Mutant], ...] = (
    OwnerOffByOne,
    LinearSplit,
    NoScratchInEstimate,
    MaxBlockCount,
    DraftKeepsSplit,
    StridedGroups,
    NonownerRealStorage,
    WrongLayoutAxes,
    DigestUnchecked,
    DisabledStillSplits,
    IndexSlotDropped,
    NoValidationUnsupported,
    DraftAdditionalIgnored,
    LinearSlotsUnpadded,
    ScaleBytesMissing,
    CardCheckSkipped,
    CpSplitAccepted,
    KvSplitAccepted,
    HostCacheWrongField,
    SplitRankModS,
    PeakScratchOmitted,
    ScaleMissingInEstimate,
    SavingsAtUniformBlocks,
    QuantizedViewReshaped,
    DraftLeaksStorage,
    ConvStateTransposed,
    TieGroupsReshuffled,
    SplitSizeBelowOneAccepted,
    WorldRemainderDropped,
    TpModSBeforeModelType,
    SleepModeAccepted,
    XtensorAccepted,
    QuantizedCacheAccepted,
    LinearWithIndexerAccepted,
    IntervalOffByOne,
    GqaHeadsNotDivided,
    MlaRopeDropped,
    SpeculativeStateIgnored,
    SsmDtypeIgnored,
    FixedSlotsUnpadded,
    PrefixCacheIgnored,
    CapacityGainInverted,
    DraftBodyTp1Ignored,
    UniformIgnoresDraft,
    AttentionSpellingLinear,
    Int8IndexScaleMissing,
    SlotCapUnchecked,
    DraftOwnShape,
    TieKeepsConsecutive,
    CapacityGainInfinite,
    RaisesPeakUnnoted,
    CrossNodeLinksFromCardMatrix,
    FirstReplicaGroupingReused,
    ReserveOncePerCard,
    MeanRounded,
    ConvValueChannelsValueDim,
    DraftMessageSplitFields,
    QuantizedRefusedByWorker,
    SplitSizeAgainstWorld,
    Int8IndexerTargetOnly,
    GroupSearchInCardOrder,
    CardCheckWithoutDraft,
    DraftIndexFromTarget,
)

MUTANTS: dict[str, type[Mutant]] = {cls.name.removeprefix("mutant_"): cls for cls in _CLASSES}
"""Short name -> mutant class; ``implementation=mutant_<short name>`` selects it."""

__all__ = ["COMPONENTS", "LABELS", "MUTANTS", "Mutant", "field_ids", *(cls.__name__ for cls in _CLASSES)]
