"""The one reader of Linux ``/proc``: a process's stat line, its children, threads, environment and
command line, and the machine's busy CPU time, CPU model and boot id. Everything here answers None (or nothing) where ``/proc``
does not have it: the process is gone, or the machine is not Linux.

Light on purpose (standard library only): the pytest CPU probe, the config store and the
rank processes import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
"""Clock ticks per second, the unit of ``/proc``'s CPU times."""

Pid = Union[int, str]
"""A process id, or ``"self"``."""


@dataclass(frozen=True, kw_only=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` the harness uses (proc(5); CPU times in clock ticks)."""

    pid: int
    state: str
    """R, S, D, Z (zombie), T, ..."""
    ppid: int
    utime: int
    stime: int
    cutime: int
    """CPU of its reaped children (user)."""
    cstime: int
    starttime: int
    """Clock ticks after boot when it started."""

    @property
    def zombie(self) -> bool:
        return self.state == "Z"

    @property
    def cpu_ticks(self) -> int:
        """Its own CPU: utime + stime."""
        return self.utime + self.stime

    @property
    def cpu_with_reaped_s(self) -> float:
        """Its own CPU and its reaped children's, in seconds."""
        return (self.utime + self.stime + self.cutime + self.cstime) / TICKS_PER_S


def stat(pid: Pid = "self") -> Optional[ProcStat]:
    """``/proc/<pid>/stat`` parsed (the command name may hold spaces and parentheses: fields are
    read after its last ``)``); None when the process is gone or there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            head, _, rest = fh.read().rpartition(b")")
        fields = rest.split()
        return ProcStat(pid=int(head.split(b" (", 1)[0]), state=fields[0].decode(), ppid=int(fields[1]),
                        utime=int(fields[11]), stime=int(fields[12]), cutime=int(fields[13]),
                        cstime=int(fields[14]), starttime=int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: Pid) -> bool:
    """Whether the process exists and is not a zombie (an unreaped one is gone for our purpose)."""
    found = stat(pid)
    return found is not None and not found.zombie


def pids() -> list[int]:
    """Every process id in ``/proc`` (none without it)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def children(pid: Pid = "self") -> list[int]:
    """The running children of a process, over all its threads (``/proc/<pid>/task/*/children``)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out = []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out += [int(child) for child in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


def descendants(pid: Pid = "self") -> list[int]:
    """Every live (not zombie) descendant of a process, children first (``children`` walked down)."""
    found, todo, seen = [], list(children(pid)), set()
    while todo:
        kid = todo.pop(0)
        if kid in seen:
            continue
        seen.add(kid)
        todo += children(kid)
        if alive(kid):
            found.append(kid)
    return found


def thread_count(pid: Pid = "self") -> Optional[int]:
    """The process's threads (``/proc/<pid>/task``), native ones included; None if unreadable."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


def environ(pid: Pid) -> Optional[list[bytes]]:
    """The process's environment as ``KEY=value`` byte strings; None if unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return None


def cmdline(pid: Pid) -> Optional[str]:
    """The process's command line, arguments joined by spaces; None if unreadable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def busy_cpu_s() -> Optional[float]:
    """CPU seconds every core of this machine has spent busy since boot (``/proc/stat``), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / TICKS_PER_S


def cpu_model() -> Optional[str]:
    """The CPU's model name (``/proc/cpuinfo``), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), None)
    except OSError:
        return None


def boot_id() -> Optional[str]:
    """This boot's random id (``/proc/sys/kernel/random/boot_id``): a pid and start time recorded under
    another boot name no process of this one; None without it."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip() or None
    except (OSError, ValueError):
        return None
