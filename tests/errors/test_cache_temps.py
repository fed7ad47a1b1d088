"""Stale temporary directories of killed cache writers are removed; a live writer's never."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ktir_models import cache_temp
from ktir_models.cache_temp import is_stale, make_temp_dir, remove_stale_temps
from ktir_models.model.weights.synthetic import ensure_synthetic, synthetic_dir, tiny_config


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _temp_named(parent, pid, age_s=0.0, tag="a"):
    path = parent / f".entry-{tag}.tmp-{cache_temp._host()}-{pid}-xyz"
    path.mkdir()
    (path / "model.safetensors").write_bytes(b"partial")
    old = time.time() - age_s
    for p in (path / "model.safetensors", path):
        os.utime(p, (old, old))
    return path


def test_rules(tmp_path):
    dead, live = _dead_pid(), os.getpid()
    stale = _temp_named(tmp_path, dead, age_s=3600)
    fresh_dead = _temp_named(tmp_path, dead, age_s=0, tag="b")  # a pid-namespace guard: too recent
    alive = _temp_named(tmp_path, live, age_s=10**6, tag="c")  # the writer exists: never removed
    assert is_stale(stale) and not is_stale(fresh_dead) and not is_stale(alive)
    foreign = tmp_path / ".entry.tmp-otherhost-1-abc"
    foreign.mkdir()
    legacy = tmp_path / ".entry.tmp-k2j3h4"  # the older name, no pid
    legacy.mkdir()
    os.utime(legacy, (time.time() - 2 * 86400,) * 2)
    assert not is_stale(foreign) and is_stale(legacy)
    assert sorted(remove_stale_temps(tmp_path)) == sorted([stale, legacy])
    assert foreign.exists() and fresh_dead.exists() and alive.exists()


def test_new_temp_dirs_record_host_and_pid(tmp_path):
    path = make_temp_dir(tmp_path / "entry")
    assert path.name.startswith(f".entry.tmp-{cache_temp._host()}-{os.getpid()}-")
    assert not is_stale(path)


# The writer writes part of its checkpoint and then waits on a pipe no one writes: it is killed
# mid-write on any machine, however fast.
WRITER = """
import os
import sys
from pathlib import Path
from ktir_models.model.weights import synthetic

def stuck(directory, *args, **kwargs):
    (Path(directory) / "model.safetensors").write_bytes(b"partial")
    read_end, _write_end = os.pipe()
    os.read(read_end, 1)

synthetic.write_synthetic = stuck
synthetic.ensure_synthetic("big", synthetic.tiny_config(), seed=1, cache_root=Path(sys.argv[1]))
"""


@pytest.mark.slow
def test_sigkill_during_the_first_write_leaves_an_orphan_the_next_run_removes(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root)])
    parent = root / "synthetic"
    deadline = time.time() + 600  # a safety net only: the partial file always comes
    def partial_written():
        return parent.is_dir() and any((p / "model.safetensors").is_file()
                                       for p in parent.iterdir() if p.name.startswith("."))

    while time.time() < deadline and not partial_written():
        assert writer.poll() is None, "the writer ended before writing its partial file"
        time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    orphans = [p for p in parent.iterdir() if p.name.startswith(".")]
    assert len(orphans) == 1 and f"-{writer.pid}-" in orphans[0].name
    monkeypatch.setattr(cache_temp, "STALE_AFTER_S", 0.0)
    cfg = tiny_config()
    final = ensure_synthetic("small", cfg, seed=0, cache_root=root)
    assert final == synthetic_dir("small", cfg, 0, cache_root_dir=root)
    assert not orphans[0].exists()
    assert sorted(p.name for p in parent.iterdir()) == [final.name]


def test_program_cache_removes_a_killed_emitters_temp_and_keeps_a_live_one(tmp_path, monkeypatch):
    """The emitted-program cache follows the same rule as the synthetic-weights cache."""
    from ktir_models.model.emit.api import cache_root, cached_program

    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path))
    root = cache_root()
    root.mkdir(parents=True)
    stale = _temp_named(root, _dead_pid(), age_s=3600, tag="dead")
    alive = _temp_named(root, os.getpid(), age_s=3600, tag="live")
    final = cached_program(tiny_config(), "decode", 1, 0)
    assert (final / "manifest.json").is_file() and final.parent == root
    assert not stale.exists() and alive.exists()
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == [alive.name]
