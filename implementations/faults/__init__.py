"""Fault-injecting implementations: the reference, misbehaving on one chosen rank (harness self-test).

``FaultyImplementation(behaviour, rank, point)`` is the reference except that, in
the rank process whose global torch.distributed rank is ``rank``, at ``point``
(``init_worker``, or ``plan`` on the master) it raises, exits, crashes, hangs,
publishes a diverging layout or allocates beyond the budget. Selected as
``implementation=fault_<case>`` (``conf/implementation/fault_*.yaml``); outside a
process group (``python -m harness.plan``, the pytest parent) it behaves as the
reference, so planning and config checks never trip the fault.
"""

from implementations.faults.faulty import BEHAVIOURS, POINTS, FaultyImplementation, InjectedFault

__all__ = ["BEHAVIOURS", "POINTS", "FaultyImplementation", "InjectedFault"]
