"""Fuzzed input files -- manifests, node programs, configs, checkpoints, goldens, run inputs --
each case run through the CLI under the error contract of harness.py (derandomized: the same
cases on every run)."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .harness import CASES, fuzz_case
from .mutations import mutate_bytes, mutate_json

BASE = settings(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


def fuzz(examples: int) -> settings:
    """Derandomized (the same cases on every run), no example database, no per-case deadline
    (harness.py's time limit applies instead). For a longer hunt outside CI:
    ``KTIR_MODELS_FUZZ_SCALE=N`` runs N times the cases, ``KTIR_MODELS_FUZZ_RANDOM=1`` new ones."""
    scale = int(os.environ.get("KTIR_MODELS_FUZZ_SCALE", "1"))
    return settings(BASE, max_examples=examples * scale,
                    derandomize=os.environ.get("KTIR_MODELS_FUZZ_RANDOM") != "1")


def _copy(src: Path, work: Path, name: str) -> Path:
    target = work / name
    shutil.copytree(src, target)
    return target


def _forward_program(model, program, *extra):
    return ["forward", model, "--program", program, "--weights", model, "--golden", "none", "-q", *extra]


@fuzz(90)
@given(data=st.data())
def test_manifests(model, program, data):
    doc = json.loads((program / "manifest.json").read_text())
    with tempfile.TemporaryDirectory() as work:
        copy = _copy(program, Path(work), "p")
        if data.draw(st.integers(0, 4), label="raw?") == 0:
            raw = mutate_bytes(data, (program / "manifest.json").read_bytes())
            (copy / "manifest.json").write_bytes(raw)
        else:
            (copy / "manifest.json").write_text(json.dumps(mutate_json(data, doc)))
        fuzz_case("manifest", _forward_program(model, copy), [copy, model])
    assert CASES["manifest"] > 0


@fuzz(25)
@given(data=st.data())
def test_node_programs(model, program, data):
    with tempfile.TemporaryDirectory() as work:
        copy = _copy(program, Path(work), "p")
        node = copy / data.draw(st.sampled_from(sorted(p.name for p in copy.glob("node*.mlir"))), label="node")
        node.write_bytes(mutate_bytes(data, node.read_bytes()))
        fuzz_case("program text", _forward_program(model, copy), [copy, model])


@fuzz(40)  # most damaged configs still run (a fresh emission each): the costliest class
@given(data=st.data())
def test_configs(model, data):
    doc = json.loads((model / "config.json").read_text())
    with tempfile.TemporaryDirectory() as work:
        copy = _copy(model, Path(work), "M")
        (copy / "config.json").write_text(json.dumps(mutate_json(data, doc, max_edits=2)))
        fuzz_case("config", ["forward", copy, "--weights", copy, "--golden", "none", "-q"], [copy])


@fuzz(50)
@given(data=st.data())
def test_checkpoints(model, program, data):
    raw = (model / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    with tempfile.TemporaryDirectory() as work:
        copy = _copy(model, Path(work), "M")
        regions = [(0, 8), (8, 8 + n), (8 + n, len(raw))]
        if data.draw(st.booleans(), label="structured header?"):
            header = json.loads(raw[8:8 + n])
            text = json.dumps(mutate_json(data, header, max_edits=2)).encode()
            damaged = struct.pack("<Q", len(text)) + text + raw[8 + n:]
        else:
            damaged = mutate_bytes(data, raw, regions)
        (copy / "model.safetensors").write_bytes(damaged)
        fuzz_case("checkpoint", ["forward", model, "--program", program, "--weights", copy, "--golden", "none",
                                 "-q"], [copy, program])


@fuzz(40)
@given(data=st.data(), rows=st.sampled_from([0, 1, 2]), cols=st.sampled_from([511, 512, 513]),
       fill=st.sampled_from([0.0, 1.0, np.inf, np.nan, -65504.0]))
def test_goldens(model, program, data, rows, cols, fill):
    golden = gzip.compress(np.full((rows, cols), fill, dtype="<f2").tobytes(), mtime=0)
    if data.draw(st.booleans(), label="damage bytes?"):
        golden = mutate_bytes(data, golden)
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "golden.f16.gz"
        path.write_bytes(golden)
        fuzz_case("golden", ["forward", model, "--program", program, "--weights", model, "--golden", path, "-q"],
                  [path, program, model])


DTYPES = ["f2", "f4", "f8", "i1", "i4", "i8", "u1", "?", "c8", "U3", "S2", "M8[s]"]


@st.composite
def npz_archives(draw):
    """Half the archives start from the kernel's valid inputs (x, y: 1x4 f16) with one array
    changed, so valid runs are fuzzed too; the rest are arbitrary sets of arrays."""
    if draw(st.booleans()):
        arrays = {"x": np.arange(4, dtype=np.float16).reshape(1, 4), "y": np.zeros((1, 4), np.float16)}
        names = draw(st.lists(st.sampled_from(["x", "y", "%x"]), max_size=1))
    else:
        arrays = {}
        names = draw(st.lists(st.sampled_from(["x", "y", "%x", "s", "zz"]), max_size=3, unique=True))
    for name in names:
        shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 4, 5]), max_size=3)))
        dtype = np.dtype(draw(st.sampled_from(DTYPES)))
        arrays[name] = np.zeros(shape, dtype=dtype)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


SCALARS = ["1", "2.5", "-0", "1e300", "70000", "-65504", "inf", "nan", "0x10", "abc", "", "1" * 5000]


@fuzz(80)
@given(data=st.data(), archive=npz_archives(), scalar=st.sampled_from(SCALARS + [None]))
def test_run_inputs(kernel, data, archive, scalar):
    if data.draw(st.integers(0, 3), label="damage bytes?") == 0:
        archive = mutate_bytes(data, archive)
    with tempfile.TemporaryDirectory() as work:
        inputs = Path(work) / "in.npz"
        inputs.write_bytes(archive)
        argv = ["run", kernel, "--inputs", inputs, "--out", Path(work) / "out.npz"]
        if scalar is not None:
            argv += ["--scalar", f"s={scalar}"]
        result = fuzz_case("run inputs", argv, [inputs, kernel])
        leftovers = [p.name for p in Path(work).iterdir() if p.name not in ("in.npz", "out.npz")]
        assert leftovers == [], leftovers  # no partial output, on any path
        assert (Path(work) / "out.npz").exists() == (result.code == 0)
