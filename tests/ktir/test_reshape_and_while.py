"""tensor.reshape (the shape-operand form) and scf.while with scf.condition, as MLIR defines them:
parsed in MLIR's custom form, verified by MLIR's rules, run against numpy references written from
the semantics, and costed by the latency model."""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import load, program, store, tile, view

from ktir_models import ktir
from ktir_models.ktir.latency import function_latency

RNG = np.random.default_rng(11)


# -- tensor.reshape -------------------------------------------------------------------------------

def reshape_kernel(src: tuple, dst: tuple, shape_text: str, shape_type: str,
                   elem: str = "f32", extra_args: str = "") -> ktir.Function:
    idx = lambda shape: ", ".join(["%c0"] * len(shape))  # noqa: E731
    body = (view("va", "a", src, elem) + view("vo", "o", dst, elem)
            + tile("ta", "va", src, src, idx(src), elem)
            + tile("to", "vo", dst, dst, idx(dst), elem)
            + load("A", "ta", src, elem) + shape_text
            + f"    %r = tensor.reshape %A(%s) : (tensor<{'x'.join(map(str, src))}x{elem}>, "
              f"{shape_type}) -> tensor<{'x'.join(map(str, dst))}x{elem}>\n"
            + store("r", "to", dst, elem))
    return program("%a: index, %o: index" + extra_args, body)


def run(fn, arrays: list[np.ndarray], out: np.ndarray) -> np.ndarray:
    m = ktir.Machine()
    bufs = [m.hbm.allocate_from(a, name=f"in{k}") for k, a in enumerate(arrays)]
    bo = m.hbm.allocate_from(out, name="out")
    addrs = [b.address for b in bufs]
    m.compile(fn).run(addrs[:1] + [bo.address] + addrs[1:])
    return bo.read()


@pytest.mark.parametrize("src,dst,shape_elem", [
    ((2, 3, 4), (6, 4), "index"), ((2, 3, 4), (4, 3, 2), "i32"), ((1, 12, 8), (12, 1, 8), "i64"),
    ((24,), (2, 2, 2, 3), "index"), ((4, 6), (24,), "i16")])
def test_reshape_is_numpys_row_major_reshape(src, dst, shape_elem):
    a = RNG.standard_normal(src).astype(np.float32)
    dims = ", ".join(map(str, dst))
    shape_type = f"tensor<{len(dst)}x{shape_elem}>"
    fn = reshape_kernel(src, dst, f"    %s = arith.constant dense<[{dims}]> : {shape_type}\n",
                        shape_type)
    got = run(fn, [a], np.zeros(dst, np.float32))
    np.testing.assert_array_equal(got, np.reshape(a, dst))


def test_reshape_reads_its_shape_at_run_time():
    """A shape operand loaded from memory (not a constant): its values drive the reshape."""
    src, dst = (2, 8), (4, 4)
    shape_text = (view("vs", "sp", (2,), "index") + tile("ts", "vs", (2,), (2,), "%c0", "index")
                  + load("s", "ts", (2,), "index"))
    fn = reshape_kernel(src, dst, shape_text, "tensor<2xindex>", extra_args=", %sp: index")
    a = np.arange(16, dtype=np.float32).reshape(src)
    got = run(fn, [a, np.array(dst, np.int64)], np.zeros(dst, np.float32))
    np.testing.assert_array_equal(got, a.reshape(dst))
    # a shape that does not fit the result type faults, naming the op
    with pytest.raises(ktir.EmulationFault, match=r"tensor.reshape: the shape operand holds"):
        run(fn, [a, np.array([2, 8], np.int64)], np.zeros(dst, np.float32))


@pytest.mark.parametrize("src,dst,shape_type,expect", [
    ((2, 3), (6,), "tensor<2xindex>", "has 2 entries but the result tensor<6xf32> has rank 1"),
    ((2, 3), (5,), "tensor<1xindex>", "changes the element count"),
    ((2, 3), (6,), "tensor<1xf32>", "must be a 1-D tensor of signless integers or index"),
    ((2, 3), (6,), "tensor<1xsi32>", "must be a 1-D tensor of signless integers or index"),
    ((2, 3), (6,), "tensor<?xindex>", "has a dynamic length"),
])
def test_reshape_verifier_refuses_what_mlir_refuses(src, dst, shape_type, expect):
    text = ("module {\n  func.func @f(%x: tensor<" + "x".join(map(str, src)) + "xf32>, "
            f"%s: {shape_type}) {{\n"
            f"    %r = tensor.reshape %x(%s) : (tensor<{'x'.join(map(str, src))}xf32>, "
            f"{shape_type}) -> tensor<{'x'.join(map(str, dst))}xf32>\n    return\n  }}\n}}\n")
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(text, "r.mlir"))
    errs = [str(d) for d in info.value.diagnostics]
    assert len(errs) == 1 and errs[0].startswith("r.mlir:3:5: error:") and expect in errs[0], errs


def test_reshape_cannot_change_the_element_type():
    text = ("module {\n  func.func @f(%x: tensor<6xf32>, %s: tensor<1xindex>) {\n"
            "    %r = tensor.reshape %x(%s) : (tensor<6xf32>, tensor<1xindex>) -> tensor<6xf16>\n"
            "    return\n  }\n}\n")
    with pytest.raises(ktir.KtirError, match="element types of source and destination differ"):
        ktir.verify(ktir.parse_text(text, "r.mlir"))


# -- scf.while ------------------------------------------------------------------------------------

WHILE_BODY = """    %pid = ktdp.get_compute_tile_id : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %two = arith.constant dense<2.0> : tensor<1x8xf32>
    %one = arith.constant dense<1.0> : tensor<1x8xf32>
    %limit = arith.addi %pid, %n : index
""" + view("va", "a", (4, 8), "f32") + view("vo", "o", (4, 8), "f32") + \
    tile("ta", "va", (4, 8), (1, 8), "%pid, %c0", "f32") + \
    tile("to", "vo", (4, 8), (1, 8), "%pid, %c0", "f32") + \
    load("x0", "ta", (1, 8), "f32") + """    %r:2 = scf.while (%k = %c0, %x = %x0)
        : (index, tensor<1x8xf32>) -> (index, tensor<1x8xf32>) {
      %go = arith.cmpi slt, %k, %limit : index
      %xp = arith.addf %x, %one : tensor<1x8xf32>
      scf.condition(%go) %k, %xp : index, tensor<1x8xf32>
    } do {
    ^bb0(%k2: index, %x2: tensor<1x8xf32>):
      %k3 = arith.addi %k2, %c1 : index
      %y = arith.mulf %x2, %two : tensor<1x8xf32>
      scf.yield %k3, %y : index, tensor<1x8xf32>
    }
""" + store("r#1", "to", (1, 8), "f32")


def while_function(grid: int = 4) -> ktir.Function:
    return program("%a: index, %o: index, %n: index", WHILE_BODY, grid=f"[{grid}]")


def while_reference(a: np.ndarray, n: int) -> np.ndarray:
    """Row p: the before region adds one (in f32) and passes the sum on; the after region
    doubles it, while k < p + n; the result is the last value passed (with the false
    condition), not the last before-region argument."""
    out = a.copy()
    for p in range(a.shape[0]):
        x = a[p].copy()
        k = 0
        while True:
            passed = x + np.float32(1)
            if not k < p + n:
                break
            x = passed * np.float32(2)
            k += 1
        out[p] = passed
    return out


@pytest.mark.parametrize("n", [0, 1, 3])
def test_while_runs_each_core_its_own_trip_count(n):
    """Four cores with different trip counts (p + n); the first run and the later (batched)
    runs give the numpy reference's bits; n = 0 on core 0 runs no trip: the values scf.condition
    passes with a false condition are the results."""
    fn = while_function()
    a = RNG.standard_normal((4, 8)).astype(np.float32)
    m = ktir.Machine()
    ba = m.hbm.allocate_from(a, name="a")
    bo = m.hbm.allocate_from(np.zeros((4, 8), np.float32), name="o")
    plan = m.compile(fn)
    want = while_reference(a, n)
    for _ in range(2):
        plan.run([ba.address, bo.address, n])
        np.testing.assert_array_equal(bo.read(), want)


def test_while_without_operands_parses_and_runs():
    """``scf.while : () -> ()`` with a condition read from memory that the after region
    clears: one trip, then the loop stops."""
    text = """module {
  func.func @k(%f: index) attributes {grid = [1]} {
    %c0 = arith.constant 0 : index
""" + view("vf", "f", (1,), "i8") + tile("tf", "vf", (1,), (1,), "%c0", "i8") + """
    scf.while : () -> () {
      %t = ktdp.load %tf : !ktdp.access_tile<1xindex> -> tensor<1xi8>
      %v = tensor.extract %t[%c0] : tensor<1xi8>
      %z = arith.constant 0 : i8
      %go = arith.cmpi ne, %v, %z : i8
      scf.condition(%go)
    } do {
      %zt = arith.constant dense<0> : tensor<1xi8>
      ktdp.store %zt, %tf : tensor<1xi8>, !ktdp.access_tile<1xindex>
      scf.yield
    }
    return
  }
}
"""
    module = ktir.parse_text(text, "w0.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    bf = m.hbm.allocate_from(np.array([5], np.int8), name="f")
    m.compile(module.function("k")).run([bf.address])
    assert bf.read().tolist() == [0]


BAD_WHILES = [
    ("scf.yield %k : index", "scf.condition(%go) %k : index", "",
     "scf.while's before region must end with 'scf.condition'", "before-terminator"),
    ("scf.condition(%k) %k : index", None, "", "scf.condition's condition must be i1",
     "condition-type"),
    ("scf.condition(%go) %k, %k : index, index", None, "",
     "scf.condition passes (index, index) but scf.while returns (index)", "passed-types"),
    (None, None, "%w = arith.index_cast %k2 : index to i32\n      scf.yield %w : i32",
     "scf.yield yields (i32) but scf.while expects (index)", "yield-types"),
]


@pytest.mark.parametrize("before_end,_unused,after_end,expect,name", BAD_WHILES,
                         ids=[b[-1] for b in BAD_WHILES])
def test_while_verifier_refuses_what_mlir_refuses(before_end, _unused, after_end, expect, name):
    before_end = before_end or "scf.condition(%go) %k : index"
    after_end = after_end or "scf.yield %k2 : index"
    text = f"""module {{
  func.func @f(%n: index) {{
    %c0 = arith.constant 0 : index
    %r = scf.while (%k = %c0) : (index) -> index {{
      %go = arith.cmpi slt, %k, %n : index
      {before_end}
    }} do {{
    ^bb0(%k2: index):
      {after_end}
    }}
    return
  }}
}}
"""
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(text, "w.mlir"))
    errs = [str(d) for d in info.value.diagnostics]
    assert any(expect in e for e in errs), errs
    assert all(e.startswith("w.mlir:") for e in errs)


def test_the_latency_model_walks_the_trips_it_can_count():
    """With the trip count known before running, each trip's vector work is charged: 2 + p
    trips on core p cost more than 0 + p, by two trips' worth on the busiest core."""
    def cycles(n: int):
        text = "".join(WHILE_BODY).replace("%limit = arith.addi %pid, %n : index",
                                           f"%nn = arith.constant {n} : index\n"
                                           "    %limit = arith.addi %pid, %nn : index")
        fn = program("%a: index, %o: index, %n: index", text, grid="[4]")
        lat = function_latency(fn)
        assert not any("scf.while" in note for note in lat.notes), lat.notes
        return lat.cycles
    c0, c2, c4 = cycles(0), cycles(2), cycles(4)
    assert c0 < c2 < c4
    assert c4 - c2 == pytest.approx(c2 - c0)


def test_the_latency_model_notes_an_unknown_trip_count():
    fn = while_function()
    lat = function_latency(fn)
    assert any("scf.while condition unknown before running" in n for n in lat.notes)


def test_generic_form_prints_and_reads_back_and_runs_the_same():
    """scf.while, scf.condition and tensor.reshape printed in MLIR's generic form read back to
    a module that prints the same and runs to the same bits."""
    from ktir_models.ktir.parse.printer import print_generic

    body = WHILE_BODY.replace(
        store("r#1", "to", (1, 8), "f32"),
        "    %sh = arith.constant dense<[1, 8]> : tensor<2xi32>\n"
        "    %z = tensor.reshape %r#1(%sh) : (tensor<1x8xf32>, tensor<2xi32>) -> tensor<1x8xf32>\n"
        + store("z", "to", (1, 8), "f32"))
    fn = program("%a: index, %o: index, %n: index", body, grid="[4]")
    text = print_generic(fn.module)
    assert '"scf.while"' in text and '"scf.condition"' in text and '"tensor.reshape"' in text
    again = ktir.parse_text(text, "generic.mlir")
    ktir.verify(again)
    assert print_generic(again) == text
    a = RNG.standard_normal((4, 8)).astype(np.float32)
    outs = []
    for f in (fn, again.only_function):
        m = ktir.Machine()
        ba = m.hbm.allocate_from(a, name="a")
        bo = m.hbm.allocate_from(np.zeros((4, 8), np.float32), name="o")
        m.compile(f).run([ba.address, bo.address, 2])
        outs.append(bo.read())
    np.testing.assert_array_equal(outs[0], while_reference(a, 2))
    np.testing.assert_array_equal(outs[1], outs[0])
