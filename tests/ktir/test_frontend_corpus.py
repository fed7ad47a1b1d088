"""The ktdp dialect's own frontend tests (``$KTIR_CORPUS/ktir-frontend``), read in place.

* Every positive test file parses and verifies.
* Every negative case (``invalid.mlir`` and ``attrs-verify-negative.mlir``, split on
  ``// -----``) is rejected on the line its ``expected-error`` points at, for the same reason:
  the message must carry the key words listed below for that case (our wording, their meaning).
* The files that are kernels run, against numpy: the adds (plain, in a loop, with runtime_arg
  sizes and addresses), the copies, the extract_slice store through a tile whose set is larger
  than its type; a runtime_arg above its upperbound faults; paged-tensor-copy's 16 MiB tile
  faults on the 2 MiB LX, the verdict the reference interpreter gives it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import corpus_path

ktir = pytest.importorskip("ktir_models.ktir")

NEGATIVE = ("invalid.mlir", "attrs-verify-negative.mlir")

# negative case (its function) -> the words our message must contain to name the same problem
REASONS: dict[str, tuple[str, ...]] = {
    "bad_load_shape": ("load", "access tile shape", "result tensor shape"),
    "bad_store_shape": ("store", "data tile shape", "access tile shape"),
    "bad_distributed_elem_type": ("element type", "input memref", "result"),
    "bad_distributed_rank": ("rank", "input memref", "result"),
    "bad_core_affinity_hbm": ("core affinity", "HBM", "LX or L0"),
    "bad_memory_view_rank": ("result memref", "rank", "sizes", "strides"),
    "bad_access_tile_elem": ("access tile element type", "index"),
    "bad_runtime_arg_granularity": ("runtime_arg granularity", "positive"),
    "bad_runtime_arg_upperbound": ("runtime_arg upperbound", "positive"),
    "bad_extract_value_type": ("result type", "underlying type", "i32"),
    "bad_extract_granularity_missing": ("cannot extract granularity", "does not have one"),
    "bad_extract_upperbound_missing": ("cannot extract upperbound", "does not have one"),
    "bad_extract_granularity_type": ("result type", "must be index", "granularity"),
    "bad_extract_upperbound_type": ("result type", "must be index", "upperbound"),
    "memspace_hbm_core_invalid": ("core affinity", "'HBM'", "LX or L0"),
    "memspace_unspecified_core_invalid": ("core affinity", "'unspecified'", "LX or L0"),
}


def frontend_dir() -> Path:
    path = corpus_path() / "ktir-frontend" / "test"
    if not path.is_dir():
        pytest.skip(f"ktir-frontend corpus not found at {path} (set KTIR_CORPUS)")
    return path


def _listing() -> tuple[list[str], list[tuple[str, int, str, int, str]]]:
    """(positive file names, negative cases as (file, case number, text, expected line,
    function name)); empty when the corpus is absent (the tests then skip)."""
    path = corpus_path() / "ktir-frontend" / "test"
    if not path.is_dir():
        return [], []
    positives = sorted(p.name for p in path.glob("*.mlir") if p.name not in NEGATIVE)
    cases = []
    for name in NEGATIVE:
        lines = (path / name).read_text().split("\n")
        starts = [0] + [k + 1 for k, line in enumerate(lines) if line.strip() == "// -----"]
        ends = starts[1:] + [len(lines) + 1]
        for n, (a, b) in enumerate(zip(starts, ends)):
            chunk = lines[a:b - 1] if b <= len(lines) else lines[a:]
            expected = None
            for k, line in enumerate(chunk):
                m = re.search(r"expected-error @(below|\+1)", line)
                if m:
                    expected = a + k + 2  # the line after the comment (1-based)
            if expected is None:
                continue
            fn = re.search(r"func\.func @(\w+)", "\n".join(chunk)).group(1)
            # blank lines in front keep every line number of the file
            cases.append((name, n, "\n" * a + "\n".join(chunk), expected, fn))
    return positives, cases


POSITIVES, CASES = _listing()


def test_the_corpus_has_what_its_readme_describes() -> None:
    frontend_dir()
    assert len(POSITIVES) == 15  # 14 of ktdp syntax and access-tile-type.mlir's "test.op"
    assert len(CASES) == 16
    assert {fn for *_, fn in CASES} == set(REASONS)


# positive files of the frontend that hold ops of MLIR's test dialect (run there with
# -allow-unregistered-dialect): they parse, and `check` refuses the op it cannot run
UNREGISTERED = {"access-tile-type.mlir": (21, "test.op")}


@pytest.mark.parametrize("name", POSITIVES or ["no-corpus"])
def test_positive_file_parses_and_verifies(name: str) -> None:
    if name in UNREGISTERED:
        module = ktir.parse_text((frontend_dir() / name).read_text(), name)
        assert module.functions
        line, op = UNREGISTERED[name]
        with pytest.raises(ktir.KtirError) as info:
            ktir.verify(module)
        first = info.value.diagnostics[0]
        assert first.loc.line == line and f"unknown operation '{op}'" in first.message
        return
    module = ktir.load_module(frontend_dir() / name)
    assert module.functions


@pytest.mark.parametrize("case", CASES or [None],
                         ids=[f"{c[0]}:{c[4]}" for c in CASES] or ["no-corpus"])
def test_negative_case_is_rejected_for_its_reason(case) -> None:
    frontend_dir()
    name, _, text, line, fn = case
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(text, name))
    diags = info.value.diagnostics
    assert len(diags) == 1, [str(d) for d in diags]
    (diag,) = diags
    assert diag.loc.line == line, str(diag)
    for word in REASONS[fn]:
        assert word in diag.message, f"{fn}: {word!r} not in {diag.message!r}"


# ---------------------------------------------------------------------------------------------
# the kernels

def _rows(seed: int, shape=(96, 64)) -> np.ndarray:
    """Multiples of 1/4 in [-2, 2): f16 sums of two are exact."""
    return (np.random.default_rng(seed).integers(-8, 8, shape) / 4).astype(np.float16)


def _abc(machine):
    """A, B, C of the add kernels: 96x64 f16 views at element addresses 1024, 12288, 18432."""
    a, b = _rows(1), _rows(2)
    machine.hbm.allocate_from(a, name="A", byte_address=1024 * 2)
    machine.hbm.allocate_from(b, name="B", byte_address=12288 * 2)
    c = machine.hbm.allocate_from(np.full((96, 64), -7, np.float16), name="C",
                                  byte_address=18432 * 2)
    return a, b, c


def _run(name: str, fn: str, args: dict, machine) -> None:
    machine.compile(ktir.load_module(frontend_dir() / name).function(fn)).run(args)


@pytest.mark.parametrize("name, rows", [("add.mlir", 3), ("add-with-control-flow.mlir", 3),
                                        ("tensor-extract-slice.mlir", 1)])
def test_add_kernels(name: str, rows: int) -> None:
    """One core adds its 3 rows (tensor-extract-slice stores the first of them through a 1x64
    tile whose set spans 2 rows: the type's box is the tile); C is untouched elsewhere."""
    m = ktir.Machine()
    a, b, c = _abc(m)
    _run(name, "add", {}, m)
    expected = np.full((96, 64), -7, np.float16)
    expected[:rows] = a[:rows] + b[:rows]
    np.testing.assert_array_equal(c.array, expected)


@pytest.mark.parametrize("M", [96, 64, 32])
def test_add_with_runtime_args(M: int) -> None:
    """M and A's address arrive as runtime_args (M <= 96: the kernel's constant addresses of B
    and C leave room for 96 rows of A); the core handles M/32 rows."""
    m = ktir.Machine()
    a, b, c = _abc(m)
    _run("add-with-control-flow-runtime-arg.mlir", "add",
         {"M_symb": M, "A_start_address_symb": 1024}, m)
    rows = M // 32
    expected = np.full(c.array.shape, -7, np.float16)
    expected[:rows] = a[:rows] + b[:rows]
    np.testing.assert_array_equal(c.array, expected)


def test_runtime_arg_above_its_upperbound_faults() -> None:
    m = ktir.Machine()
    _abc(m)
    with pytest.raises(ktir.EmulationFault, match="M_symb is 301, above its upperbound 300"):
        _run("add-with-control-flow-runtime-arg.mlir", "add",
             {"M_symb": 301, "A_start_address_symb": 1024}, m)


@pytest.mark.parametrize("name, fn, args", [("basic.mlir", "basic", {}),
                                            ("basic-runtime-arg.mlir", "basic_sym",
                                             {"M_Sym": 32})])
def test_copy_kernels_store_what_they_load(name: str, fn: str, args: dict) -> None:
    m = ktir.Machine()
    a = _rows(3, (32, 64))
    buf = m.hbm.allocate_from(a, name="A", byte_address=1024 * 2)
    _run(name, fn, args, m)
    np.testing.assert_array_equal(buf.array, a)


def test_runtime_arg_extract_gives_value_granularity_and_bound() -> None:
    """The frontend's extract file plus a kernel of ours storing all three reads."""
    text = (frontend_dir() / "runtime-arg-extract.mlir").read_text()
    module = ktir.parse_text(text + """
func.func @all3(%m: !ktdp.runtime_arg<index, granularity=3, upperbound=300>, %out: index) {
  %v = ktdp.runtime_arg_extract value from %m : <index, granularity=3, upperbound=300> -> index
  %g = ktdp.runtime_arg_extract granularity from %m : <index, granularity=3, upperbound=300> -> index
  %u = ktdp.runtime_arg_extract upperbound from %m : <index, granularity=3, upperbound=300> -> index
  %c0 = arith.constant 0 : index
  %view = ktdp.construct_memory_view %out, sizes: [3], strides: [1] {
    coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 2 >= 0)>,
    memory_space = #ktdp.spyre_memory_space<HBM>} : memref<3xi64>
  %t = ktdp.construct_access_tile %view[%c0] {
    access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 2 >= 0)>} : memref<3xi64> -> !ktdp.access_tile<3xindex>
  %vi = arith.index_cast %v : index to i64
  %gi = arith.index_cast %g : index to i64
  %ui = arith.index_cast %u : index to i64
  %x = tensor.from_elements %vi, %gi, %ui : tensor<3xi64>
  ktdp.store %x, %t : tensor<3xi64>, !ktdp.access_tile<3xindex>
  return
}
""", "extract.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    out = m.hbm.allocate((3,), "int64", name="out")
    m.compile(module.function("all3")).run({"m": 123, "out": out.address})
    np.testing.assert_array_equal(out.array, [123, 3, 300])


def test_paged_tensor_copy_is_refused_for_its_lx_footprint() -> None:
    """Its one load is a 4x8x2048x128 f16 tile (16 MiB) on a core with 2 MiB of LX: a fault
    naming the LX, as the reference interpreter reports for this kernel (lx_overflow)."""
    m = ktir.Machine()
    # the page table (4 x 32 i32 at element 20000000); the kernel faults before reading X
    m.hbm.allocate_from(np.zeros((4, 32), np.int32), name="Idx", byte_address=20000000 * 4)
    with pytest.raises(ktir.EmulationFault, match="LX"):
        _run("paged-tensor-copy.mlir", "paged_tensor_copy_1core", {}, m)


def test_aliases_between_and_after_functions() -> None:
    """MLIR allows ``#alias = ...`` anywhere at the top level, before its first use."""
    text = """#row = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>
func.func @a(%x: index) {
  return
}
#id = affine_map<(d0) -> (d0)>
func.func @b(%x: index) {
  %v = ktdp.construct_memory_view %x, sizes: [4], strides: [1] {
    coordinate_set = #row, memory_space = #ktdp.spyre_memory_space<HBM>} : memref<4xf16>
  %c0 = arith.constant 0 : index
  %t = ktdp.construct_access_tile %v[%c0] {access_tile_set = #row, access_tile_order = #id}
      : memref<4xf16> -> !ktdp.access_tile<4xindex>
  return
}
#unused = affine_map<(d0) -> (d0)>
"""
    module = ktir.parse_text(text, "aliases.mlir")
    ktir.verify(module)
    assert list(module.functions) == ["a", "b"] and "#unused" in module.aliases


def test_a_function_taking_a_memref_is_a_callee_not_a_kernel() -> None:
    module = ktir.load_module(frontend_dir() / "roundtrip.mlir")
    with pytest.raises(ktir.KtirError, match="is a callee"):
        ktir.Machine().compile(module.function("test_load")).run({"at": 0})
