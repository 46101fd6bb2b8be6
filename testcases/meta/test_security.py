"""Security: loopback-only rendezvous on a file store, configs read as data, no pickle from disk, no eval.

* A live pool's rank processes: every TCP socket they hold (read from
  ``/proc/<pid>/fd`` socket inodes matched in ``/proc/<pid>/net/tcp{,6}``) is on
  127.0.0.1 / ::1, and their store is a ``FileStore`` in the pool's private directory.
* A config.json with ``auto_map`` / ``trust_remote_code`` / ``__class__`` next to a
  ``modeling_*.py`` that would leave a marker file when imported is read as numbers;
  YAML with a ``!!python/object/apply:os.system`` tag (topology file, config option)
  is refused and the command never runs.
* Static: no unpickling, ``torch.load``, unsafe YAML loader, ``eval``/``exec`` in
  ``harness/``, ``contract/`` or ``implementations/``.
* OmegaConf has no resolver that evaluates code: only OmegaConf's and Hydra's
  built-ins are registered, and ``${eval:...}`` does not resolve.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.paths import CONF_DIR
from testcases import ROOT as REPO

pytestmark = pytest.mark.meta

SOURCE_DIRS = ("harness", "contract", "implementations")
TCP_LISTEN = "0A"


# ---- rendezvous ---------------------------------------------------------------------


def rendezvous_facts(ctx) -> dict:
    """Rank body: this rank's pid, the chain of store types under its default group, rendezvous env."""
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)  # gloo pairs are connected by now
    store = dist.distributed_c10d._get_default_store()
    kinds = []
    while store is not None:
        kinds.append(type(store).__name__)
        store = getattr(store, "underlying_store", None)
    return {
        "pid": os.getpid(),
        "stores": kinds,
        "env": {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")},
    }


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _tcp_table(pid: int) -> list[tuple[str, str, int]]:
    """(local address, state, inode) of every TCP socket in the process's network namespace."""
    rows = []
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        path = f"/proc/{pid}/net/{name}"
        if not os.path.exists(path):
            continue
        with open(path) as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                rows.append((_address(fields[1], family), fields[3], int(fields[9])))
    return rows


def _address(hex_addr: str, family: int) -> str:
    """``0100007F:1F90`` -> ``127.0.0.1``; IPv6 likewise (the kernel prints 32-bit words in host order)."""
    ip_hex = hex_addr.split(":")[0]
    raw = bytes.fromhex(ip_hex)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)) if sys.byteorder == "little" else raw
    return socket.inet_ntop(family, words)


def _loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1") or address.startswith("::ffff:127.")


def test_ranks_use_loopback_and_a_file_store():
    from harness.rankpool import RankPool
    from harness.rankpool.rendezvous import STORE_FILE

    with RankPool(4, backend="gloo", timeout_s=60) as pool:
        facts = pool.run(rendezvous_facts)
        tmp_dir = pool.tmp_dir
        assert sorted(f["pid"] for f in facts) == sorted(pool.pids)
        store_file = Path(tmp_dir) / STORE_FILE
        assert store_file.is_file()
        assert stat.S_IMODE(os.stat(tmp_dir).st_mode) == 0o700  # mkdtemp: private to this user
        tcp_seen = 0
        for f in facts:
            assert "FileStore" in f["stores"] and "TCPStore" not in f["stores"], f["stores"]
            assert f["env"]["MASTER_ADDR"] is None and f["env"]["MASTER_PORT"] is None
            assert f["env"]["GLOO_SOCKET_IFNAME"] == "lo"
            mine = _socket_inodes(f["pid"])
            for address, state, inode in _tcp_table(f["pid"]):
                if inode in mine:
                    tcp_seen += 1
                    assert _loopback(address), f"rank pid {f['pid']}: TCP socket on {address} (state {state})"
        assert tcp_seen >= 4, "gloo connects ranks over TCP; the check saw none, so it checked nothing"


def test_address_decoding():
    """The /proc/net/tcp decoding itself, on known encodings (little-endian host)."""
    if sys.byteorder != "little":
        pytest.skip("encodings below are little-endian")
    assert _address("0100007F:1F90", socket.AF_INET) == "127.0.0.1"
    assert _address("00000000:0016", socket.AF_INET) == "0.0.0.0"
    assert _address("00000000000000000000000001000000:0016", socket.AF_INET6) == "::1"
    assert not _loopback("0.0.0.0") and not _loopback("::") and _loopback("127.0.0.1")


# ---- configs are data -----------------------------------------------------------------

REMOTE_CODE = """
from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text("model code ran")
class EvilConfig: ...
"""


def _remote_code_checkpoint(root: Path) -> Path:
    """A checkpoint directory whose config.json asks for its own code, as trust_remote_code models do."""
    ckpt = root / "ckpt"
    ckpt.mkdir()
    (ckpt / "modeling_evil.py").write_text(REMOTE_CODE)
    (ckpt / "configuration_evil.py").write_text(REMOTE_CODE)
    (ckpt / "config.json").write_text(json.dumps({
        "model_type": "deepseek_v3", "architectures": ["EvilForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "modeling_evil.EvilConfig"},
        "trust_remote_code": True, "__class__": "modeling_evil.EvilConfig",
        "num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "torch_dtype": "bfloat16",
    }))
    return ckpt


def test_config_json_is_read_as_data(tmp_path):
    from harness.config.hf_loader import model_spec_from_hf_config

    ckpt = _remote_code_checkpoint(tmp_path)
    before = set(sys.modules)
    spec = model_spec_from_hf_config(ckpt / "config.json")
    assert (spec.num_hidden_layers, spec.attention, spec.kv_lora_rank) == (61, "mla", 512)
    assert not (ckpt / "IMPORTED").exists()
    assert not {m for m in set(sys.modules) - before if "evil" in m}


def test_plan_command_reads_remote_code_checkpoint_as_data(tmp_path):
    ckpt = _remote_code_checkpoint(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "harness.plan", f"model_path={ckpt}", "layerwise=s2"],
                          capture_output=True, text=True, cwd=ckpt, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["num_layers"] == 61
    assert not (ckpt / "IMPORTED").exists()


def _marker_yaml(marker: Path) -> str:
    return f'!!python/object/apply:os.system ["touch {marker}"]'


def test_topology_yaml_tag_is_refused(tmp_path):
    marker = tmp_path / "PWNED"
    topo = tmp_path / "topo.yaml"
    topo.write_text(f"name: {_marker_yaml(marker)}\ncards: [GPU0, GPU1]\nlinks: [[X, PIX], [PIX, X]]\n")
    proc = subprocess.run([sys.executable, "-m", "harness.plan", f"hardware.topology={topo}"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: ")
    assert "hardware.topology" in proc.stderr or str(topo) in proc.stderr
    assert not marker.exists()


def test_config_option_yaml_tag_is_refused(tmp_path):
    """A config-group option carrying a python tag: Hydra/OmegaConf's loader refuses it, nothing runs."""
    from contract.errors import UserError
    from harness.config.compose import compose_config

    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    marker = tmp_path / "PWNED"
    (conf / "model" / "evil.yaml").write_text(
        (conf / "model" / "deepseek_v3.yaml").read_text() + f"\nmodel_type: {_marker_yaml(marker)}\n")
    with pytest.raises(UserError):
        compose_config(["model=evil"], config_dir=conf)
    assert not marker.exists()


# ---- static: no unpickling from disk, no unsafe loaders, no eval ----------------------

FORBIDDEN_CALLS = {
    "pickle.load": "unpickles a file", "pickle.loads": "unpickles bytes", "pickle.Unpickler": "unpickles",
    "cPickle.load": "unpickles a file", "dill.load": "unpickles a file", "dill.loads": "unpickles bytes",
    "marshal.load": "loads code objects", "marshal.loads": "loads code objects", "shelve.open": "a pickle store",
    "torch.load": "unpickles a checkpoint", "joblib.load": "unpickles a file",
    "yaml.unsafe_load": "constructs Python objects", "yaml.full_load": "constructs Python objects",
    "yaml.load_all": "needs an explicit safe loader", "os.system": "runs a shell", "os.popen": "runs a shell",
}
FORBIDDEN_NAMES = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_ATTRS = {"UnsafeLoader", "FullLoader", "Loader"}  # yaml.Loader / yaml.UnsafeLoader construct objects


def _sources() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (REPO / d).rglob("*.py"))


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = lambda n: f"{path.relative_to(REPO)}:{n.lineno}"  # noqa: E731
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in FORBIDDEN_CALLS:
                out.append(f"{where(node)} {name}: {FORBIDDEN_CALLS[name]}")
            if name in FORBIDDEN_NAMES:
                out.append(f"{where(node)} {name}(): evaluates code")
            if name in ("yaml.load",) and not any(
                k.arg == "Loader" and _dotted(k.value).endswith("SafeLoader") for k in node.keywords
            ):
                out.append(f"{where(node)} yaml.load without Loader=SafeLoader")
            if name.endswith("load") and name.split(".")[0] in ("np", "numpy") and any(
                k.arg == "allow_pickle" for k in node.keywords
            ):
                out.append(f"{where(node)} {name}(allow_pickle=...): unpickles a file")
            if any(k.arg == "trust_remote_code" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                   for k in node.keywords):
                out.append(f"{where(node)} {name}(trust_remote_code=...): runs a checkpoint's code")
            if name.startswith("subprocess.") and any(
                k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                for k in node.keywords
            ):
                out.append(f"{where(node)} {name}(shell=...): runs a shell")
        elif isinstance(node, ast.Attribute) and _dotted(node.value) == "yaml" and node.attr in FORBIDDEN_ATTRS:
            out.append(f"{where(node)} yaml.{node.attr}: constructs Python objects")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in ("pickle", "cPickle", "dill", "shelve", "marshal", "joblib"):
                    out.append(f"{where(node)} import {module}")
    return out


ALLOWED = {
    ("harness/rankpool/wire.py", "import pickle"): "the control plane's object codec",
    ("harness/rankpool/wire.py", "pickle.loads"): "bytes from ranks of the same pool over its own group, as "
                                                  "torch.distributed's object collectives unpickle them",
}
"""(file, pattern) -> why: the only places a pattern above may appear. Never a file or a config."""


def _allowed(violation: str) -> bool:
    where, _, what = violation.partition(" ")
    return any(where.split(":")[0] == file and what.startswith(pattern) for file, pattern in ALLOWED)


def test_no_unpickling_unsafe_yaml_or_eval_in_sources():
    sources = _sources()
    assert len(sources) > 40, "the scan found too few files to mean anything"
    found = [v for path in sources for v in _violations(path)]
    problems = [v for v in found if not _allowed(v)]
    assert not problems, "\n".join(problems)
    unused = [key for key in ALLOWED if not any(_allowed(v) and v.startswith(key[0]) and key[1] in v for v in found)]
    assert not unused, f"allowances that match nothing any more (remove them): {unused}"


def test_static_scan_catches_each_pattern(tmp_path, monkeypatch):
    """The scanner itself, on a file holding one of each forbidden pattern."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pickle\nimport yaml, torch, subprocess, os\n"
        "pickle.load(open('x', 'rb'))\ntorch.load('ckpt.pt')\nyaml.load(open('a'))\n"
        "yaml.load(open('a'), Loader=yaml.FullLoader)\neval('1')\nexec('x = 1')\n"
        "subprocess.run('ls', shell=True)\nos.system('ls')\n"
        "yaml.load(open('a'), Loader=yaml.SafeLoader)\nsubprocess.run(['ls'], shell=False)\n"
        "AutoConfig.from_pretrained('x', trust_remote_code=True)\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    found = _violations(bad)
    for words in ("import pickle", "pickle.load", "torch.load", "yaml.load without", "yaml.FullLoader", "eval()",
                  "exec()", "shell=", "os.system", "trust_remote_code"):
        assert any(words in f for f in found), f"{words!r} not caught: {found}"
    assert not any(":11 " in f or ":12 " in f for f in found), found  # the safe forms pass


# ---- no eval in config resolvers ----------------------------------------------------------

OMEGACONF_BUILTINS = {"oc.create", "oc.decode", "oc.deprecated", "oc.dict.keys", "oc.dict.values", "oc.env", "oc.select"}
HYDRA_BUILTINS = {"now", "hydra", "python_version"}
PROJECT_RESOLVERS = {"run_id"}
"""``${run_id:}`` (harness.config.store): a fixed per-process token for output folders; takes no argument."""


def _import_everything() -> None:
    for package in SOURCE_DIRS:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if info.name.rsplit(".", 1)[-1] != "__main__":
                importlib.import_module(info.name)


def test_only_builtin_resolvers_are_registered():
    from hydra.core.utils import setup_globals
    from omegaconf import OmegaConf
    from omegaconf.basecontainer import BaseContainer

    _import_everything()
    setup_globals()  # what a running Hydra app registers
    registered = set(BaseContainer._resolvers)
    assert registered - OMEGACONF_BUILTINS - HYDRA_BUILTINS - PROJECT_RESOLVERS == set()
    for name in ("eval", "python", "exec", "oc.eval"):
        assert not OmegaConf.has_resolver(name)
    # the project's one resolver evaluates nothing it is given: an argument is an error, not code
    from harness.config.store import register, run_id

    register()
    assert OmegaConf.create({"x": "${run_id:}"}).x == run_id()
    from omegaconf.errors import InterpolationResolutionError

    with pytest.raises(InterpolationResolutionError, match="takes 0 positional arguments"):
        _ = OmegaConf.create({"x": "${run_id:os.getcwd}"}).x


def test_eval_interpolation_does_not_run(tmp_path):
    marker = tmp_path / "PWNED"
    code = f'__import__("os").system("touch {marker}")'
    for override in (f"model.name=${{eval:{code}}}", "hardware.facts.x=${eval:1+1}"):
        proc = subprocess.run([sys.executable, "-m", "harness.plan", "+" + override if "facts" in override else override],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert proc.returncode != 0, f"{override}: accepted\n{proc.stdout[-1000:]}"
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException, UnsupportedInterpolationType

    with pytest.raises(UnsupportedInterpolationType):
        OmegaConf.to_container(OmegaConf.create({"x": "${eval:'1+1'}"}), resolve=True)
    with pytest.raises(OmegaConfBaseException):
        OmegaConf.to_container(OmegaConf.create({"x": f"${{eval:{code}}}"}), resolve=True)
    assert not marker.exists()


def test_run_id_is_one_per_process_even_when_its_module_is_imported_again(monkeypatch):
    """pytest's in-process runs drop the modules they imported; OmegaConf keeps the resolver the first
    import registered. The id must not change with the module object."""
    import sys

    from omegaconf import OmegaConf

    from harness.config import store

    store.register()
    first = OmegaConf.create({"x": "${run_id:}"}).x
    monkeypatch.delitem(sys.modules, "harness.config.store")
    again = importlib.import_module("harness.config.store")
    assert again is not store
    again.register()
    assert again.run_id() == store.run_id() == first == OmegaConf.create({"x": "${run_id:}"}).x
    assert first.startswith(f"{os.getpid()}-")


def test_an_allowance_covers_its_own_file_and_pattern_only(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "harness" / "rankpool").mkdir(parents=True)
    codec = tmp_path / "harness" / "rankpool" / "wire.py"
    codec.write_text("import pickle\npickle.loads(b'')\neval('1')\npickle.load(open('f', 'rb'))\n")
    other = tmp_path / "harness" / "rankpool" / "other.py"
    other.write_text("import pickle\npickle.loads(b'')\n")
    left = [v for path in (codec, other) for v in _violations(path) if not _allowed(v)]
    assert sorted(v.split(" ", 1)[0] for v in left) == [
        "harness/rankpool/other.py:1", "harness/rankpool/other.py:2",  # the same calls elsewhere
        "harness/rankpool/wire.py:3", "harness/rankpool/wire.py:4",  # other patterns in the allowed file
    ], left
