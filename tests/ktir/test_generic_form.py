"""MLIR's generic op form gives the same IR as the custom form, and runs bit-identically.

Every ktir-examples kernel, every positive ktir-frontend file and the first nodes of each
scratchy fixture are printed in generic form by our printer (ktir/parse/printer.py), parsed back, and
compared op by op with the custom-form parse (names aside). Then every ktir-examples kernel
runner of test_examples.py runs twice, once on each parse, and the HBM contents after every
plan run must be byte-identical. Plus hand-written generic text in the spellings MLIR tools
print (properties, integer predicates, operandSegmentSizes, static arrays with the dynamic
sentinel), and located errors for malformed generic ops.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import corpus_missing_reason, corpus_path

ktir = pytest.importorskip("ktir_models.ktir")
from ktir_models.ktir.ir import affine  # noqa: E402
from ktir_models.ktir.exec.plan import Plan  # noqa: E402
from ktir_models.ktir.ir.nodes import DenseConstant  # noqa: E402
from ktir_models.ktir.parse.printer import print_generic  # noqa: E402

NEGATIVE = ("invalid.mlir", "attrs-verify-negative.mlir")


def corpus_programs() -> list:
    reason = corpus_missing_reason()
    if reason is not None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-corpus")]
    root = corpus_path()
    files = sorted((root / "ktir-examples").rglob("*.mlir")) + \
        sorted((root / "ktir-examples").rglob("*.ktir"))
    frontend = root / "ktir-frontend" / "test"
    if frontend.is_dir():
        files += sorted(p for p in frontend.glob("*.mlir") if p.name not in NEGATIVE)
    for fixture in ("smollm2-135m", "smollm2-135m-prefill", "llama-3.2-1b"):
        files += [root / "scratchy" / fixture / f"node{k}.mlir" for k in range(3)]
    return [pytest.param(p, id=str(p.relative_to(root))) for p in files]


def _canon(v):
    if isinstance(v, list):
        return [_canon(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_canon(x) for x in v)
    if isinstance(v, affine.AffineMap):
        return ("map", v.num_dims, v.num_syms, tuple(_expr(e) for e in v.results))
    if isinstance(v, affine.AffineSet):
        return ("set", v.num_dims, v.num_syms, tuple((_expr(e), q) for e, q in v.constraints))
    if isinstance(v, DenseConstant):
        return ("dense", v.values, v.splat)
    return v


def _expr(e):
    """An affine expression up to the order of its terms (the printer writes linear forms)."""
    lf = affine.linear_form(e)
    if lf is None:
        return (e[0],) + tuple(_expr(x) for x in e[1:])
    coeffs, k = lf
    return ("linear", tuple(sorted((key, c) for key, c in coeffs.items() if c)), k)


def _combiner(op) -> str | None:
    """A reduce body ``yield(combiner(a, b))`` is what the shorthand ``{ combiner }`` means."""
    if "combiner" in op.attrs:
        return op.attrs["combiner"]
    if op.name != "linalg.reduce" or len(op.regions) != 1:
        return None
    ops = op.regions[0].block.ops
    if len(ops) == 2 and ops[1].name == "linalg.yield" and ops[1].operands == [ops[0].result]:
        return ops[0].name
    return None


def ir_dump(fn) -> list:
    """Everything the verifier and compiler read, values numbered by definition order. The
    declared type lists are left out: they repeat the operand types, which are compared."""
    ids: dict[int, int] = {}

    def vid(v) -> int:
        return ids.setdefault(id(v), len(ids))

    out: list = [("args", [(vid(a), a.name, a.type) for a in fn.args], list(fn.results),
                  fn.grid)]  # argument names too: plans and manifests bind by name

    def block(b, depth: int) -> None:
        out.append(("block", depth, [(vid(a), a.type) for a in b.args]))
        for op in b.ops:
            combiner = _combiner(op)
            attrs = sorted((k, _canon(v)) for k, v in op.attrs.items()
                           if k not in ("types", "combiner"))
            out.append((depth, op.name, [vid(v) for v in op.operands],
                        [(vid(r), r.type) for r in op.results], attrs, combiner,
                        {g: [vid(v) for v in vs] for g, vs in op.groups.items()}))
            if combiner is None:
                for r in op.regions:
                    for bb in r.blocks:
                        block(bb, depth + 1)

    block(fn.body.block, 0)
    return out


# corpus files holding ops of MLIR's test dialect: read (and printed) but refused by verify
UNREGISTERED_OPS = {"access-tile-type.mlir"}


def _load(path: Path):
    """Parse + verify, ktir-cpu's ring reduces with their reshaping reading."""
    reshaping = "ring_reduce" in path.name
    if path.name in UNREGISTERED_OPS:
        return ktir.parse_text(path.read_text(), str(path)), reshaping
    return ktir.load_module(path, reshaping_reduce=reshaping), reshaping


@pytest.mark.parametrize("path", corpus_programs())
def test_generic_form_gives_the_same_ir(path: Path) -> None:
    module, reshaping = _load(path)
    text = print_generic(module)
    assert '"ktdp.' in text or '"arith.' in text or '"func.return"' in text
    again = ktir.parse_text(text, f"{path.name}.generic")
    if path.name not in UNREGISTERED_OPS:
        ktir.verify(again, reshaping_reduce=reshaping)
    assert list(again.functions) == list(module.functions)
    for name, fn in module.functions.items():
        assert ir_dump(again.functions[name]) == ir_dump(fn), name


# ---------------------------------------------------------------------------------------------
# every kernel runner of test_examples.py, on the custom and on the generic parse

def _runner_cases() -> list:
    reason = corpus_missing_reason()
    if reason is not None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-corpus")]
    import test_examples

    return [pytest.param(rel, id=rel) for rel in sorted(test_examples.RUNNERS)
            if rel not in test_examples.SLOW_KERNELS
            and rel not in test_examples.EXPECTED_FAILURES]


def _snapshots(monkeypatch, rel: str, generic: bool) -> list:
    import test_examples

    snaps: list = []
    original = Plan.run

    def recording_run(self, args=()):
        stats = original(self, args)
        snaps.append([(r.start, r.data.tobytes()) for r in self.machine.hbm.regions])
        return stats

    def load(rel_path: str):
        module, reshaping = _load(test_examples.examples_dir() / rel_path)
        if generic:
            module = ktir.parse_text(print_generic(module), f"{rel_path}.generic")
            ktir.verify(module, reshaping_reduce=reshaping)
        (fn,) = module.functions.values()
        return fn

    with monkeypatch.context() as m:
        m.setattr(Plan, "run", recording_run)
        m.setattr(test_examples, "load_kernel", load)
        test_examples.RUNNERS[rel](test_examples.examples_dir() / rel)
    return snaps


@pytest.mark.parametrize("rel", _runner_cases())
def test_generic_form_runs_bit_identically(rel: str, monkeypatch) -> None:
    custom = _snapshots(monkeypatch, rel, generic=False)
    generic = _snapshots(monkeypatch, rel, generic=True)
    assert custom, f"{rel}: the runner ran no plan"
    assert len(custom) == len(generic)
    for k, (a, b) in enumerate(zip(custom, generic)):
        assert a == b, f"{rel}: HBM differs after plan run {k}"


# ---------------------------------------------------------------------------------------------
# hand-written generic text, as MLIR tools print it

HAND = """
"builtin.module"() ({
  "func.func"() <{function_type = (index, index) -> (), sym_name = "scale"}> ({
  ^bb0(%a: index, %out: index):
    %c0 = "arith.constant"() <{value = 0 : index}> : () -> index
    %c2 = "arith.constant"() <{value = 2 : index}> : () -> index
    %v = "ktdp.construct_memory_view"(%a, %c2) <{coordinate_set = affine_set<(d0, d1)[s0] : (d0 >= 0, -d0 + s0 - 1 >= 0, d1 >= 0, -d1 + 7 >= 0)>, memory_space = #ktdp.spyre_memory_space<HBM>, operandSegmentSizes = array<i32: 1, 1, 0>, static_sizes = array<i64: -9223372036854775808, 8>, static_strides = array<i64: 8, 1>}> : (index, index) -> memref<?x8xf16>
    %w = "ktdp.construct_memory_view"(%out) <{coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 7 >= 0)>, memory_space = #ktdp.spyre_memory_space<HBM>, operandSegmentSizes = array<i32: 1, 0, 0>, static_sizes = array<i64: 2, 8>, static_strides = array<i64: 8, 1>}> : (index) -> memref<2x8xf16>
    %t = "ktdp.construct_access_tile"(%v, %c0) <{access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 7 >= 0)>, base_map = affine_map<(d0) -> (d0, 0)>, operandSegmentSizes = array<i32: 1, 1, 0>}> : (memref<?x8xf16>, index) -> !ktdp.access_tile<2x8xindex>
    %u = "ktdp.construct_access_tile"(%w) <{access_tile_order = affine_map<(d0, d1) -> (d0, d1)>, access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 7 >= 0)>, base_map = affine_map<() -> (0, 0)>, operandSegmentSizes = array<i32: 1, 0, 0>}> : (memref<2x8xf16>) -> !ktdp.access_tile<2x8xindex>
    %x = "ktdp.load"(%t) : (!ktdp.access_tile<2x8xindex>) -> tensor<2x8xf16>
    %lt = "arith.cmpi"(%c0, %c2) <{predicate = 2 : i64}> : (index, index) -> i1
    %y = "scf.if"(%lt) ({
      %s = "arith.addf"(%x, %x) <{fastmath = #arith.fastmath<none>}> : (tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<2x8xf16>
      "scf.yield"(%s) : (tensor<2x8xf16>) -> ()
    }, {
      "scf.yield"(%x) : (tensor<2x8xf16>) -> ()
    }) : (i1) -> tensor<2x8xf16>
    "ktdp.store"(%y, %u) : (tensor<2x8xf16>, !ktdp.access_tile<2x8xindex>) -> ()
    "func.return"() : () -> ()
  }) : () -> ()
}) : () -> ()
"""


def test_hand_written_generic_module_runs() -> None:
    """Properties, the dynamic-size sentinel, an integer predicate (2 = slt), a default
    access_tile_order, a discarded fastmath attribute and regions, against numpy."""
    module = ktir.parse_text(HAND, "hand.mlir")
    ktir.verify(module)
    fn = module.function("scale")
    cmp = [op for op in fn.walk() if op.name == "arith.cmpi"][0]
    assert cmp.attrs["predicate"] == "slt"
    view = fn.body.block.ops[2]
    assert view.attrs["static_sizes"] == [None, 8]
    m = ktir.Machine()
    data = (np.arange(16).reshape(2, 8) / 4).astype(np.float16)
    src = m.hbm.allocate_from(data, name="src")
    out = m.hbm.allocate((2, 8), "float16", name="out")
    m.compile(fn).run({"a": src.address, "out": out.address})
    np.testing.assert_array_equal(out.array, data + data)


def test_unregistered_dialect_op_is_read_but_refused_by_verify_and_compile() -> None:
    """The reader keeps an op of an unknown dialect (its types are read), but a module that
    verifies must run: the verifier refuses it at its location, and so does the compiler."""
    text = """func.func @f() {
  %0 = "test.op"() : () -> !ktdp.access_tile<2x3xindex>
  return
}
"""
    module = ktir.parse_text(text, "t.mlir")
    assert module.function("f").body.block.ops[0].results[0].type.shape == (2, 3)
    with pytest.raises(ktir.KtirError, match=r"t\.mlir:2:3: error: unknown operation 'test\.op'"):
        ktir.verify(module)
    with pytest.raises(ktir.KtirError, match="does not implement 'test.op'"):
        ktir.Machine().compile(module.function("f"))


@pytest.mark.parametrize("text, message", [
    ('%0 = "arith.frobf"() : () -> f16', "unknown operation 'arith.frobf'"),
    ('%0 = "ktdp.construct_memory_view"(%a) <{static_sizes = array<i64: 4>, '
     'static_strides = array<i64: 1>}> : (index) -> memref<4xf16>', "operandSegmentSizes"),
    ('%0 = "arith.addi"(%a, %a) : (index) -> index', "2 operands but its type lists 1"),
    ('%0 = "arith.addi"(%a, %a) : (index, i32) -> index', "generic op's type says i32"),
    ('%0 = "arith.cmpi"(%a, %a) <{predicate = 12 : i64}> : (index, index) -> i1',
     "predicate 12"),
])
def test_malformed_generic_ops_are_located_errors(text: str, message: str) -> None:
    src = "func.func @f(%a: index) {\n  " + text + "\n  return\n}\n"
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(src, "g.mlir"))
    msg = str(info.value)
    assert message in msg and "g.mlir:2:" in msg, msg


def test_generic_text_parses_alike_with_and_without_the_parse_caches() -> None:
    """The line cache and op templates (parse_text's defaults) give the reference parse on
    generic text too, the second time round included (templates recorded the first time)."""
    from ktir_models.ktir.parse import parser as P

    reason = corpus_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    for path in sorted((corpus_path() / "ktir-examples").rglob("*.mlir"))[:12]:
        module, _ = _load(path)
        text = print_generic(module)
        reference = P.parse_text(text, "g", cached=False)
        for _ in range(2):
            cached = P.parse_text(text, "g")
            for name, fn in reference.functions.items():
                assert ir_dump(cached.functions[name]) == ir_dump(fn), (path.name, name)
