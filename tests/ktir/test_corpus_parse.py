"""Every KTIR file of the shared corpus parses and verifies, in-process and through the CLI.

One parametrized test per .mlir/.ktir file (1179 files: three scratchy fixtures and the 33
ktir-examples kernels), then ``ktir-models check`` over all of them in a few subprocess batches,
which must exit 0.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus_missing_reason, corpus_path

ktir = pytest.importorskip("ktir_models.ktir")

KTIR_SUFFIXES = (".mlir", ".ktir")


def corpus_files() -> list[Path]:
    """The kernels and scratchy nodes; ktir-frontend/ (the dialect's own lit tests, negative
    cases included) has its own test, tests/ktir/test_frontend_corpus.py."""
    root = corpus_path()
    return sorted(p for p in root.rglob("*") if p.suffix in KTIR_SUFFIXES and p.is_file()
                  and p.relative_to(root).parts[0] != "ktir-frontend")


def file_cases() -> list:
    reason = corpus_missing_reason()
    if reason is not None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-corpus")]
    root = corpus_path()
    return [pytest.param(p, id=str(p.relative_to(root))) for p in corpus_files()]


def test_corpus_has_the_expected_files(corpus_dir: Path) -> None:
    """The counts the README promises: 452 + 452 + 242 scratchy nodes and 33 example kernels."""
    files = corpus_files()
    by_folder: dict[str, int] = {}
    for path in files:
        top = path.relative_to(corpus_dir).parts
        key = top[1] if top[0] == "scratchy" else top[0]
        by_folder[key] = by_folder.get(key, 0) + 1
    assert by_folder == {
        "smollm2-135m": 452,
        "smollm2-135m-prefill": 452,
        "llama-3.2-1b": 242,
        "ktir-examples": 33,
    }


# the dialect's verifier rejects these (an inter_tile_reduce whose result reshapes its
# partial, tensor<1x128xf16> -> tensor<128xf16>); ktir-cpu reads them with a reshape
RESHAPING_REDUCE = ("ktir-examples/ktir/ring_reduce.mlir",
                    "ktir-examples/ktir/ring_reduce_inner_loop.mlir",
                    "ktir-examples/latency/ring_reduce_multi_group.mlir")


def _reshaping(path: Path) -> bool:
    return str(path.relative_to(corpus_path())) in RESHAPING_REDUCE


@pytest.mark.parametrize("path", file_cases())
def test_file_parses_and_verifies(path: Path) -> None:
    if _reshaping(path):
        with pytest.raises(ktir.KtirError, match="must be the future's partial type"):
            ktir.load_module(path)
    module = ktir.load_module(path, reshaping_reduce=_reshaping(path))
    assert module.functions, f"{path}: no func.func found"
    for name, fn in module.functions.items():
        assert module.function(name) is fn
        assert len(fn.arg_names) == len(fn.arg_types), f"{path}:@{name}: names/types differ"
        assert len(fn.grid) == 3 and all(int(g) >= 1 for g in fn.grid), f"{path}:@{name}: grid {fn.grid}"


def test_scratchy_functions_match_their_manifest(corpus_dir: Path) -> None:
    """Each manifest node names a function of its file with exactly the manifest's arguments."""
    import json

    for fixture in ("smollm2-135m", "smollm2-135m-prefill", "llama-3.2-1b"):
        folder = corpus_dir / "scratchy" / fixture
        manifest = json.loads((folder / "manifest.json").read_text())
        for node in manifest["nodes"][:16] + manifest["nodes"][-2:]:
            fn = ktir.load_module(folder / node["mlir"]).function(node["fn"])
            assert list(fn.arg_names) == [a["name"] for a in node["args"]], f"{fixture}:{node['mlir']}"


# ``ktir-models check`` over every corpus file, in two batches run side by side (the CI machine
# has two cores); each batch must exit 0 and print one "ok" line per file.
BATCHES = 2


@pytest.mark.slow
def test_cli_check_accepts_the_whole_corpus(corpus_dir: Path) -> None:
    files = corpus_files()
    batches = [files[b::BATCHES] for b in range(BATCHES)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ktir_models", "check", "--reshaping-reduce",
             *map(str, batch)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for batch in batches
    ]
    for batch, proc in zip(batches, procs):
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"ktir-models check exited {proc.returncode}:\n{stderr[-4000:]}"
        ok_lines = [line for line in stdout.splitlines() if ": ok" in line]
        assert len(ok_lines) == len(batch), stdout[-4000:]
