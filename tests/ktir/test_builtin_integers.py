"""MLIR's integer types and arith's integer ops, against references written from the rules with
Python's exact integers: signless iN holds N bits, the op reads them signed or unsigned; results
wrap modulo 2^N; divsi truncates toward zero, floordivsi floors, ceildivsi rounds up; signed and
unsigned types (si/ui) live in tensors, memrefs and views as storage."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_machine import load, program, store, tile, ty, view

from ktir_models import ktir

RNG = np.random.default_rng(7)
WIDTHS = (8, 16, 32, 64)


def as_signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def as_unsigned(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def reference(name: str, a: int, b: int, bits: int) -> int:
    """arith's integer op ``name`` on two N-bit patterns (given as signed ints), the result as
    a signed int (the N bits read signed)."""
    sa, sb, ua, ub = a, b, as_unsigned(a, bits), as_unsigned(b, bits)
    r = {
        "addi": lambda: sa + sb, "subi": lambda: sa - sb, "muli": lambda: sa * sb,
        "divsi": lambda: trunc_div(sa, sb), "remsi": lambda: sa - trunc_div(sa, sb) * sb,
        "floordivsi": lambda: sa // sb, "ceildivsi": lambda: ceil_div(sa, sb),
        "divui": lambda: ua // ub, "remui": lambda: ua % ub, "ceildivui": lambda: ceil_div(ua, ub),
        "andi": lambda: sa & sb, "ori": lambda: sa | sb, "xori": lambda: sa ^ sb,
        "minsi": lambda: min(sa, sb), "maxsi": lambda: max(sa, sb),
        "minui": lambda: as_signed(min(ua, ub), bits),
        "maxui": lambda: as_signed(max(ua, ub), bits),
        "shli": lambda: 0 if ub >= bits else sa << ub,
        "shrsi": lambda: sa >> min(ub, bits - 1),
        "shrui": lambda: 0 if ub >= bits else ua >> ub,
    }[name]()
    return as_signed(r, bits)


OPS = ("addi subi muli divsi remsi floordivsi ceildivsi divui remui ceildivui andi ori xori "
       "minsi maxsi minui maxui shli shrsi shrui").split()
DIVISIONS = {"divsi", "remsi", "floordivsi", "ceildivsi", "divui", "remui", "ceildivui"}
SHIFTS = {"shli", "shrsi", "shrui"}


def operands(name: str, bits: int, n: int = 24) -> tuple[list[int], list[int]]:
    """Edge values (the extremes, -1, 0, 1) against each other, then random ones; divisors are
    non-zero and shift amounts mostly in range (a few past the width)."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    edges = [lo, hi, -1, 0, 1, lo + 1, -7, 7]
    a = edges + [int(x) for x in RNG.integers(lo, hi, n - len(edges), endpoint=True)]
    if name in SHIFTS:
        b = [int(x) for x in RNG.integers(0, bits, n)]
        b[:4] = [0, bits - 1, bits, bits + 3]
    else:
        b = list(reversed(edges)) + [int(x) for x in RNG.integers(lo, hi, n - len(edges),
                                                                  endpoint=True)]
    if name in DIVISIONS:
        b = [x if x != 0 else 3 for x in b]
        b[:3] = [-1, 2, -2]
    return a, b


def tensor_kernel(op_text: str, n: int, elem: str, out_elem: str) -> ktir.Function:
    body = (view("va", "a", (n,), elem) + view("vb", "b", (n,), elem)
            + view("vo", "o", (n,), out_elem)
            + tile("ta", "va", (n,), (n,), "%c0", elem) + tile("tb", "vb", (n,), (n,), "%c0", elem)
            + tile("to", "vo", (n,), (n,), "%c0", out_elem)
            + load("A", "ta", (n,), elem) + load("B", "tb", (n,), elem)
            + f"    %r = {op_text}\n" + store("r", "to", (n,), out_elem))
    return program("%a: index, %b: index, %o: index", body)


def scalar_kernel(op_text: str, n: int, elem: str, out_elem: str) -> ktir.Function:
    """The same op on scalars: each pair extracted, combined, gathered back (run-time scalars,
    not folded constants)."""
    body = (view("va", "a", (n,), elem) + view("vb", "b", (n,), elem)
            + view("vo", "o", (n,), out_elem)
            + tile("ta", "va", (n,), (n,), "%c0", elem) + tile("tb", "vb", (n,), (n,), "%c0", elem)
            + tile("to", "vo", (n,), (n,), "%c0", out_elem)
            + load("A", "ta", (n,), elem) + load("B", "tb", (n,), elem))
    for k in range(n):
        body += (f"    %i{k} = arith.constant {k} : index\n"
                 f"    %A{k} = tensor.extract %A[%i{k}] : tensor<{n}x{elem}>\n"
                 f"    %B{k} = tensor.extract %B[%i{k}] : tensor<{n}x{elem}>\n"
                 f"    %r{k} = {op_text.replace('%A', f'%A{k}').replace('%B', f'%B{k}')}\n")
    names = ", ".join(f"%r{k}" for k in range(n))
    body += f"    %r = tensor.from_elements {names} : tensor<{n}x{out_elem}>\n"
    body += store("r", "to", (n,), out_elem)
    return program("%a: index, %b: index, %o: index", body)


def run(fn: ktir.Function, a: np.ndarray, b: np.ndarray, out_dtype) -> np.ndarray:
    m = ktir.Machine()
    ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    bo = m.hbm.allocate_from(np.zeros(a.shape, out_dtype), name="o")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning may leak out
        m.compile(fn).run([ba.address, bb.address, bo.address])
    return bo.read()


@pytest.mark.parametrize("form", ["tensor", "scalar"])
@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("name", OPS)
def test_integer_op_matches_the_twos_complement_reference(name, bits, form):
    elem, dt = f"i{bits}", np.dtype(f"int{bits}")
    a, b = operands(name, bits, 12 if form == "scalar" else 24)
    n = len(a)
    kernel = tensor_kernel if form == "tensor" else scalar_kernel
    t = f"tensor<{n}x{elem}>" if form == "tensor" else elem
    fn = kernel(f"arith.{name} %A, %B : {t}", n, elem, elem)
    got = run(fn, np.array(a, dt), np.array(b, dt), dt)
    want = np.array([reference(name, x, y, bits) for x, y in zip(a, b)], dt)
    np.testing.assert_array_equal(got, want)


def test_wraparound_and_division_edges_by_hand():
    """The cases the rules single out, written out for i32."""
    lo, hi = -2**31, 2**31 - 1
    cases = [("addi", hi, 1, lo), ("subi", lo, 1, hi), ("muli", 65536, 65536, 0),
             ("divsi", -7, 2, -3), ("floordivsi", -7, 2, -4), ("ceildivsi", -7, 2, -3),
             ("ceildivsi", 7, 2, 4), ("remsi", -7, 2, -1), ("divui", -2, 2, hi),
             ("remui", -1, 10, 5), ("divsi", lo, -1, lo), ("shrui", -1, 28, 15),
             ("shrsi", -16, 2, -4), ("maxui", -1, 1, -1), ("maxsi", -1, 1, 1)]
    for name, x, y, want in cases:
        fn = tensor_kernel(f"arith.{name} %A, %B : tensor<1xi32>", 1, "i32", "i32")
        got = run(fn, np.array([x], np.int32), np.array([y], np.int32), np.int32)
        assert int(got[0]) == want, (name, x, y, int(got[0]), want)


CMP_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


def cmp_reference(pred: str, a: int, b: int, bits: int) -> bool:
    if pred[0] == "u":
        a, b = as_unsigned(a, bits), as_unsigned(b, bits)
    op = pred[1:] if pred[0] in "su" else pred
    return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
            "ge": a >= b}[op]


@pytest.mark.parametrize("form", ["tensor", "scalar"])
@pytest.mark.parametrize("bits", (8, 64))
@pytest.mark.parametrize("pred", CMP_PREDICATES)
def test_cmpi_compares_by_the_predicates_signedness(pred, bits, form):
    elem, dt = f"i{bits}", np.dtype(f"int{bits}")
    a, b = operands("addi", bits, 12)
    n = len(a)
    kernel = tensor_kernel if form == "tensor" else scalar_kernel
    t = f"tensor<{n}x{elem}>" if form == "tensor" else elem
    fn = kernel(f"arith.cmpi {pred}, %A, %B : {t}", n, elem, "i1")
    got = run(fn, np.array(a, dt), np.array(b, dt), np.bool_)
    want = np.array([cmp_reference(pred, x, y, bits) for x, y in zip(a, b)])
    np.testing.assert_array_equal(got, want)
    if pred in ("slt", "ult"):  # -1 against 0 tells the readings apart
        assert cmp_reference(pred, -1, 0, bits) == (pred == "slt")


def cast_kernel(name: str, n: int, src: str, dst: str, form: str) -> ktir.Function:
    body = (view("va", "a", (n,), src) + view("vo", "o", (n,), dst)
            + tile("ta", "va", (n,), (n,), "%c0", src) + tile("to", "vo", (n,), (n,), "%c0", dst)
            + load("A", "ta", (n,), src))
    if form == "tensor":
        body += f"    %r = arith.{name} %A : tensor<{n}x{src}> to tensor<{n}x{dst}>\n"
    else:
        for k in range(n):
            body += (f"    %i{k} = arith.constant {k} : index\n"
                     f"    %A{k} = tensor.extract %A[%i{k}] : tensor<{n}x{src}>\n"
                     f"    %r{k} = arith.{name} %A{k} : {src} to {dst}\n")
        body += (f"    %r = tensor.from_elements {', '.join(f'%r{k}' for k in range(n))} : "
                 f"tensor<{n}x{dst}>\n")
    body += store("r", "to", (n,), dst)
    return program("%a: index, %o: index", body)


def run_cast(fn, a: np.ndarray, out_dtype) -> np.ndarray:
    m = ktir.Machine()
    ba = m.hbm.allocate_from(a, name="a")
    bo = m.hbm.allocate_from(np.zeros(a.shape, out_dtype), name="o")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.compile(fn).run([ba.address, bo.address])
    return bo.read()


CASTS = [("extsi", "i8", "i32"), ("extui", "i8", "i32"), ("extsi", "i1", "i16"),
         ("extui", "i1", "i16"), ("trunci", "i32", "i8"), ("trunci", "i16", "i1"),
         ("sitofp", "i8", "f32"), ("uitofp", "i8", "f32"), ("sitofp", "i1", "f32"),
         ("uitofp", "i64", "f64"), ("extui", "i32", "i64")]


def cast_reference(name: str, v: int, src: str, dst: str):
    sbits = 1 if src == "i1" else int(src[1:])
    s, u = as_signed(v, sbits), as_unsigned(v, sbits)
    if name == "extsi":
        return s
    if name == "extui":
        return u
    if name == "trunci":
        dbits = 1 if dst == "i1" else int(dst[1:])
        return as_unsigned(v, dbits) if dbits == 1 else as_signed(v, dbits)
    return float(s if name == "sitofp" else u)


@pytest.mark.parametrize("form", ["tensor", "scalar"])
@pytest.mark.parametrize("name,src,dst", CASTS)
def test_casts_read_the_bits_as_the_op_says(name, src, dst, form):
    np_of = {"i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
             "f32": np.float32, "f64": np.float64}
    if src == "i1":
        vals = [0, 1, 1, 0]
    else:
        bits = int(src[1:])
        vals = [-(1 << (bits - 1)), (1 << (bits - 1)) - 1, -1, 0, 1, -100 % (1 << bits) - 128]
        vals = [as_signed(v, bits) for v in vals]
    a = np.array(vals, np_of[src])
    got = run_cast(cast_kernel(name, len(vals), src, dst, form), a, np_of[dst])
    want = np.array([cast_reference(name, v, src, dst) for v in vals]).astype(np_of[dst])
    np.testing.assert_array_equal(got, want)
    if (name, src) == ("extsi", "i1"):
        assert int(got[1]) == -1  # true sign-extends to all ones


def test_index_cast_sign_extends_and_index_castui_zero_extends():
    text = """module {
  func.func @k(%o: index) attributes {grid = [1]} {
    %c0 = arith.constant 0 : index
    %m1 = arith.constant -1 : i8
    %s = arith.index_cast %m1 : i8 to index
    %u = arith.index_castui %m1 : i8 to index
    %si = arith.index_cast %s : index to i64
    %ui = arith.index_cast %u : index to i64
    %r = tensor.from_elements %si, %ui : tensor<2xi64>
""" + view("vo", "o", (2,), "i64") + tile("to", "vo", (2,), (2,), "%c0", "i64") + \
        store("r", "to", (2,), "i64") + "    return\n  }\n}\n"
    module = ktir.parse_text(text, "ic.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    bo = m.hbm.allocate_from(np.zeros(2, np.int64), name="o")
    m.compile(module.function("k")).run([bo.address])
    assert bo.read().tolist() == [-1, 255]


def test_division_by_zero_faults_with_the_op_named():
    fn = tensor_kernel("arith.divsi %A, %B : tensor<2xi32>", 2, "i32", "i32")
    with pytest.raises(ktir.EmulationFault, match="division by zero"):
        run(fn, np.array([1, 2], np.int32), np.array([1, 0], np.int32), np.int32)


@pytest.mark.parametrize("elem,dtype", [("si32", np.int32), ("ui8", np.uint8),
                                        ("si64", np.int64), ("ui32", np.uint32)])
def test_signed_and_unsigned_types_are_storage_in_views_and_tensors(elem, dtype):
    """si/ui tensors load, reshape and store their values unchanged (numpy's int/uint types)."""
    n = 6
    body = (view("va", "a", (2, 3), elem) + view("vo", "o", (3, 2), elem)
            + tile("ta", "va", (2, 3), (2, 3), "%c0, %c0", elem)
            + tile("to", "vo", (3, 2), (3, 2), "%c0, %c0", elem)
            + load("A", "ta", (2, 3), elem)
            + "    %s = arith.constant dense<[3, 2]> : tensor<2xindex>\n"
            + f"    %r = tensor.reshape %A(%s) : (tensor<2x3x{elem}>, tensor<2xindex>) -> "
              f"tensor<3x2x{elem}>\n"
            + store("r", "to", (3, 2), elem))
    fn = program("%a: index, %o: index", body)
    info = np.iinfo(dtype)
    a = np.array([info.min, info.max, 0, 1, info.max - 1, 2], dtype).reshape(2, 3)
    m = ktir.Machine()
    ba, bo = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(np.zeros((3, 2), dtype),
                                                                     name="o")
    m.compile(fn).run([ba.address, bo.address])
    assert bo.read().dtype == dtype
    np.testing.assert_array_equal(bo.read(), a.reshape(3, 2))
    assert n == a.size


def test_si32_index_memref_drives_an_indirect_tile():
    """A slot table of si32 (as the paged-attention kernels write it) selects rows."""
    text = """module {
  func.func @k(%idx: index, %src: index, %dst: index) attributes {grid = [1]} {
    %c0 = arith.constant 0 : index
""" + view("vi", "idx", (4,), "si32") + view("vs", "src", (8, 4), "f16") + \
        view("vd", "dst", (4, 4), "f16") + """    %g = ktdp.construct_indirect_access_tile
        intermediate_variables(%i, %j) %vs[ind(%vi[%i]), (%j)] {
        variables_space_order = affine_map<(d0, d1) -> (d0, d1)>,
        variables_space_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 3 >= 0)>}
        : memref<8x4xf16>, memref<4xsi32> -> !ktdp.access_tile<4x4xindex>
    %x = ktdp.load %g : !ktdp.access_tile<4x4xindex> -> tensor<4x4xf16>
""" + tile("td", "vd", (4, 4), (4, 4), "%c0, %c0") + store("x", "td", (4, 4)) + \
        "    return\n  }\n}\n"
    module = ktir.parse_text(text, "ind.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    rows = np.array([6, 0, 3, 3], np.int32)
    src = RNG.standard_normal((8, 4)).astype(np.float16)
    bi, bs = m.hbm.allocate_from(rows, name="idx"), m.hbm.allocate_from(src, name="src")
    bd = m.hbm.allocate_from(np.zeros((4, 4), np.float16), name="dst")
    m.compile(module.function("k")).run([bi.address, bs.address, bd.address])
    np.testing.assert_array_equal(bd.read(), src[rows])


def test_types_print_back_as_written():
    for elem in ("si8", "si16", "si32", "si64", "ui8", "ui16", "ui32", "ui64"):
        fn = program("%a: index", view("va", "a", (2,), elem))
        assert str(fn.body.block.ops[-2].result.type) == f"memref<{ty((2,), elem)}>"


@pytest.mark.parametrize("op", ["divui", "remui", "shrui", "maxui", "divsi", "addi", "ceildivsi",
                                "cmpi ult", "cmpi slt"])
def test_scalar_ops_on_a_grid_read_their_width(op):
    """Each of 8 cores combines its own i32 scalars (a per-core value: the grid-batched plans
    hold them stacked); the first run and the batched later runs give the reference's bits."""
    G = 8
    name, _, pred = op.partition(" ")
    out_elem, dt = ("i1", np.bool_) if pred else ("i32", np.int32)
    text_op = f"arith.{name} {pred + ', ' if pred else ''}%x, %y : i32"
    body = (view("va", "a", (G,), "i32") + view("vb", "b", (G,), "i32")
            + view("vo", "o", (G,), out_elem)
            + "    %pid = ktdp.get_compute_tile_id : index\n"
            + tile("ta", "va", (G,), (G,), "%c0", "i32")
            + tile("tb", "vb", (G,), (G,), "%c0", "i32")
            + tile("to", "vo", (G,), (1,), "%pid", out_elem)
            + load("A", "ta", (G,), "i32") + load("B", "tb", (G,), "i32")
            + "    %x = tensor.extract %A[%pid] : tensor<8xi32>\n"
            + "    %y = tensor.extract %B[%pid] : tensor<8xi32>\n"
            + f"    %r0 = {text_op}\n"
            + f"    %r = tensor.from_elements %r0 : tensor<1x{out_elem}>\n"
            + store("r", "to", (1,), out_elem))
    fn = program("%a: index, %b: index, %o: index", body, grid=f"[{G}]")
    a = [-1, -7, 2**31 - 1, -2**31, 100, -100, 5, 0]
    b = [3, 2, 2, -1, 7, -7, 31, 9]
    if name == "shrui":
        b = [1, 4, 31, 0, 2, 3, 31, 5]
    m = ktir.Machine()
    ba = m.hbm.allocate_from(np.array(a, np.int32), name="a")
    bb = m.hbm.allocate_from(np.array(b, np.int32), name="b")
    bo = m.hbm.allocate_from(np.zeros(G, dt), name="o")
    plan = m.compile(fn)
    if pred:
        want = np.array([cmp_reference(pred, x, y, 32) for x, y in zip(a, b)])
    else:
        want = np.array([reference(name, x, y, 32) for x, y in zip(a, b)], np.int32)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plan.run([ba.address, bb.address, bo.address])
        np.testing.assert_array_equal(bo.read(), want)
