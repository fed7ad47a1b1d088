"""The spyreop dialect: every intrinsic inside linalg.generic bodies and standalone on scalars,
against numpy references written here from each op's meaning (float64 evaluation, one rounding
to the result type; df16 through the scalar reference encoder of test_df16), and each
verifier rule refused with a located error."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_df16 import ref_decode, ref_encode
from test_machine import load, store, tile, ty, view

from ktir_models import ktir
from ktir_models.ktir.ir.errors import KtirError
from torch_test_device import TORCH_DEVICE

RNG = np.random.default_rng(2026)
DF16 = "!spyreop.df16"
N = 64


def kernel(elems: list[str], out_elem: str, body: str, n: int = N) -> str:
    """Loads one [n] tensor per input element type, runs ``body`` (inputs %x0.., output block
    argument %o, result %r) in a linalg.generic, stores the result."""
    args = ", ".join(f"%a{k}: index" for k in range(len(elems))) + ", %out: index"
    text = ""
    for k, e in enumerate(elems):
        text += (view(f"v{k}", f"a{k}", (n,), e) + tile(f"t{k}", f"v{k}", (n,), (n,), "%c0", e)
                 + load(f"X{k}", f"t{k}", (n,), e))
    text += (view("vo", "out", (n,), out_elem) + tile("to", "vo", (n,), (n,), "%c0", out_elem)
             + f"    %E = tensor.empty() : tensor<{ty((n,), out_elem)}>\n")
    maps = ", ".join(["affine_map<(d0) -> (d0)>"] * (len(elems) + 1))
    ins = ", ".join(f"%X{k}" for k in range(len(elems)))
    in_types = ", ".join(f"tensor<{ty((n,), e)}>" for e in elems)
    bb = ", ".join(f"%x{k}: {e}" for k, e in enumerate(elems)) + f", %o: {out_elem}"
    out_t = f"tensor<{ty((n,), out_elem)}>"
    text += (f"    %R = linalg.generic {{indexing_maps = [{maps}], iterator_types = "
             f"[\"parallel\"]}} ins({ins} : {in_types}) outs(%E : {out_t}) {{\n"
             f"    ^bb0({bb}):\n      {body}\n      linalg.yield %r : {out_elem}\n"
             f"    }} -> tensor<{ty((n,), out_elem)}>\n" + store("R", "to", (n,), out_elem))
    return (f"module {{\n  func.func @k({args}) attributes {{grid = [1]}} {{\n"
            f"    %c0 = arith.constant 0 : index\n{text}    return\n  }}\n}}\n")


def run(text: str, inputs: list[np.ndarray], out_dtype, runs: int = 1, **machine) -> np.ndarray:
    """The kernel's output; ``runs`` > 1 runs the plan again (a grid's stacked form is built for
    the second run), the output zeroed before each."""
    module = ktir.parse_text(text, "spyreop.mlir")
    ktir.verify(module)
    m = ktir.Machine(**machine)
    bufs = [m.hbm.allocate_from(x, name=f"a{k}") for k, x in enumerate(inputs)]
    zeros = np.zeros(inputs[0].shape if inputs else (N,), out_dtype)
    out = m.hbm.allocate_from(zeros, name="o")
    plan = m.compile(module.function("k"))
    for _ in range(runs):
        out.write(zeros)
        plan.run([b.address for b in bufs] + [out.address])
    return out.read()


# -- values and rounding, from first principles ---------------------------------------------------

def values_of(x: np.ndarray, elem: str) -> list[float]:
    if elem == DF16:
        return [ref_decode(int(b)) for b in x]
    return [float(v) for v in x]


def rounded(vals: list[float], elem: str) -> np.ndarray:
    """Python floats -> the element type's bits (uint16 / uint32), one rounding."""
    if elem == DF16:
        return np.array([ref_encode(v) for v in vals], np.uint16)
    if elem == "f16":
        return np.array(vals, np.float64).astype(np.float16).view(np.uint16)
    return np.array(vals, np.float64).astype(np.float32).view(np.uint32)


def sample(elem: str, lo: float, hi: float) -> np.ndarray:
    x = RNG.uniform(lo, hi, N)
    if elem == DF16:
        return np.array([ref_encode(float(v)) for v in x], np.uint16)
    return x.astype(np.float16 if elem == "f16" else np.float32)


def bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16) if x.dtype.itemsize == 2 else x.view(np.uint32)


def _sig(x):
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


UNARY = {  # op -> (reference on one Python float, input range)
    "exp": (math.exp, (-8, 8)),
    "sqrt": (math.sqrt, (0.01, 50)),
    "rsqrt": (lambda x: 1.0 / math.sqrt(x), (0.01, 50)),
    "reciprocal": (lambda x: 1.0 / x, (0.1, 20)),
    "sigmoid": (_sig, (-10, 10)),
    "silu": (lambda x: x * _sig(x), (-10, 10)),
    "gelu": (lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))), (-5, 5)),
}
DTYPES = {"f16": np.float16, "f32": np.float32, DF16: np.uint16}


# gelu takes f16 and df16 only (its f32 form is refused: REFUSED below)
@pytest.mark.parametrize("name,elem", [(n, e) for n in UNARY for e in ("f16", DF16, "f32")
                                       if not (n == "gelu" and e == "f32")])
def test_unary_intrinsic_in_a_generic_body(name, elem):
    fn, (lo, hi) = UNARY[name]
    x = sample(elem, lo, hi)
    text = kernel([elem], elem, f"%r = spyreop.{name} %x0 : {elem}")
    got = run(text, [x], DTYPES[elem])
    want = rounded([fn(v) for v in values_of(x, elem)], elem)
    np.testing.assert_array_equal(bits(got), want)


@pytest.mark.parametrize("elem", ["f16", DF16, "f32"])
def test_realdiv(elem):
    a, b = sample(elem, -20, 20), sample(elem, 0.5, 9)
    text = kernel([elem, elem], elem, f"%r = spyreop.realdiv %x0, %x1 : {elem}")
    got = run(text, [a, b], DTYPES[elem])
    want = rounded([p / q for p, q in zip(values_of(a, elem), values_of(b, elem))], elem)
    np.testing.assert_array_equal(bits(got), want)


@pytest.mark.parametrize("elem", ["f16", DF16])
@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (0.5, 1.0), (2.0, 3.0)])
def test_softplus_beta_threshold(elem, beta, threshold):
    x = sample(elem, -6, 6)
    text = kernel([elem], elem,
                  f"%r = spyreop.softplus %x0 beta {beta} threshold {threshold} : {elem}")
    got = run(text, [x], DTYPES[elem])

    def ref(v):
        return v if beta * v > threshold else math.log1p(math.exp(beta * v)) / beta
    vals = values_of(x, elem)
    want = rounded([ref(v) for v in vals], elem)
    np.testing.assert_array_equal(bits(got), want)
    assert any(beta * v > threshold for v in vals) or threshold > 6 * beta  # both branches seen


@pytest.mark.parametrize("elem", ["f16", DF16, "f32"])
def test_layernorm_stages(elem):
    x, m, s = sample(elem, -3, 3), sample(elem, -1, 1), sample(elem, 2, 4)
    c, w, b = sample(elem, 0.5, 2), sample(elem, -2, 2), sample(elem, -1, 1)
    X, M, S, C, W, B = (values_of(v, elem) for v in (x, m, s, c, w, b))
    one = run(kernel([elem], elem, f"%r = spyreop.layernormscale %x0 : {elem}"), [s],
              DTYPES[elem])
    np.testing.assert_array_equal(bits(one), rounded([1 / math.sqrt(v) for v in S], elem))
    two = run(kernel([elem, elem], elem, f"%r = spyreop.layernormscale %x0 squares %x1 : {elem}"),
              [m, s], DTYPES[elem])
    np.testing.assert_array_equal(bits(two), rounded(
        [1 / math.sqrt(q - p * p) for p, q in zip(M, S)], elem))
    norm = run(kernel([elem] * 5, elem, "%r = spyreop.layernormnorm %x0 squares %x1 scale %x2 "
                      f"weight %x3 bias %x4 : {elem}"), [x, m, c, w, b], DTYPES[elem])
    np.testing.assert_array_equal(bits(norm), rounded(
        [(p - q) * r * s_ + t for p, q, r, s_, t in zip(X, M, C, W, B)], elem))


@pytest.mark.parametrize("elem", ["f16", DF16, "f32"])
def test_exx2_and_the_fused_pair(elem):
    x = sample(elem, -3, 3)
    X = values_of(x, elem)
    body = f"%m, %q = spyreop.exx2 %x0 : {elem}\n      %r = spyreop.realdiv %q, %m : {elem}"
    got = run(kernel([elem], elem, body), [x], DTYPES[elem])
    q_vals = values_of(rounded([v * v for v in X], elem).view(DTYPES[elem]), elem)
    np.testing.assert_array_equal(bits(got), rounded([q / v for q, v in zip(q_vals, X)], elem))
    # fused: exx2_fused then layernormscale_fused is 1/sqrt(x^2 - x^2) = inf (or NINF) for
    # exact squares; use the one-element pair's scale on a mean-shifted input instead
    fused = {"f16": "!spyreop.fp16_fused", DF16: "!spyreop.df16_fused",
             "f32": "!spyreop.fp32_fused"}[elem]
    body = (f"%p = spyreop.exx2_fused %x0 : {elem} -> {fused}\n"
            f"      %r = spyreop.layernormscale_fused %p : {fused} -> {elem}")
    got = run(kernel([elem], elem, body), [x], DTYPES[elem])
    halves = [(m_, q) for m_, q in zip(X, q_vals)]
    want = []
    for m_, q in halves:
        d = q - m_ * m_
        want.append(math.inf if d == 0 else (math.nan if d < 0 else 1 / math.sqrt(d)))
    # compared as values: a NaN's sign is not part of the meaning
    np.testing.assert_array_equal(values_of(got, elem),
                                  values_of(rounded(want, elem).view(DTYPES[elem]), elem))


@pytest.mark.parametrize("elem", ["f16", DF16, "f32"])
@pytest.mark.parametrize("pred,fn", [("equal", lambda a, b: a == b),
                                     ("notequal", lambda a, b: a != b),
                                     ("greaterthan", lambda a, b: a > b),
                                     ("greaterequal", lambda a, b: a >= b),
                                     ("lesserthan", lambda a, b: a < b),
                                     ("lesserequal", lambda a, b: a <= b)])
def test_compare_then_select(elem, pred, fn):
    a = sample(elem, -2, 2)
    b = a.copy()
    b[::2] = sample(elem, -2, 2)[::2]  # half equal, half not
    body = (f"%c = spyreop.compare <{pred}> %x0, %x1 : {elem}\n"
            f"      %r = spyreop.select %c, %x0, %x1 : {elem}")
    got = run(kernel([elem, elem], elem, body), [a, b], DTYPES[elem])
    A, B = values_of(a, elem), values_of(b, elem)
    np.testing.assert_array_equal(bits(got), rounded(
        [p if fn(p, q) else q for p, q in zip(A, B)], elem))
    flags = run(kernel([elem, elem], elem, f"%r = spyreop.compare <{pred}> %x0, %x1 : {elem}"),
                [a, b], DTYPES[elem])
    np.testing.assert_array_equal(bits(flags), rounded([float(fn(p, q)) for p, q in zip(A, B)],
                                                       elem))


def test_integer_intrinsics_wrap():
    a = RNG.integers(-2 ** 31, 2 ** 31, N, dtype=np.int64)
    b = RNG.integers(-2 ** 31, 2 ** 31, N, dtype=np.int64)
    a[0], b[0] = 2 ** 31 - 1, 1  # wraps to -2^31
    a32, b32 = a.astype(np.int32), b.astype(np.int32)

    def wrap32(v: int) -> int:
        return (v + 2 ** 31) % 2 ** 32 - 2 ** 31
    for name, fn in (("addi32toi32", lambda p, q: p + q), ("muli32toi32", lambda p, q: p * q)):
        got = run(kernel(["i32", "i32"], "i32", f"%r = spyreop.{name} %x0, %x1"), [a32, b32],
                  np.int32)
        np.testing.assert_array_equal(got, [wrap32(fn(int(p), int(q))) for p, q in zip(a, b)])
    a64 = a * 2 ** 32 + 12345
    b64 = np.full(N, 2 ** 62, np.int64)
    got = run(kernel(["i64", "i64"], "i64", "%r = spyreop.addi64toi64 %x0, %x1"), [a64, b64],
              np.int64)
    np.testing.assert_array_equal(
        got, [(int(p) + int(q) + 2 ** 63) % 2 ** 64 - 2 ** 63 for p, q in zip(a64, b64)])


def test_idx32toaddr_attribute_and_operand_forms():
    i = np.arange(N, dtype=np.int32) * 1000003
    got = run(kernel(["i32"], "i32", "%r = spyreop.idx32toaddr %x0 base 0xDEADBEEF stride 4"),
              [i], np.int32)
    want = [((0xDEADBEEF + 4 * int(v)) % 2 ** 32 + 2 ** 31) % 2 ** 32 - 2 ** 31 for v in i]
    np.testing.assert_array_equal(got, want)
    base = np.full(N, -7, np.int32)
    stride = np.arange(N, dtype=np.int32) - 5
    got = run(kernel(["i32"] * 3, "i32", "%r = spyreop.idx32toaddr %x0 base %x1 stride %x2"),
              [i, base, stride], np.int32)
    np.testing.assert_array_equal(
        got, [((-7 + int(s) * int(v)) + 2 ** 31) % 2 ** 32 - 2 ** 31 for v, s in zip(i, stride)])


@pytest.mark.parametrize("elem", ["f16", DF16, "f32"])
def test_standalone_scalar_intrinsics(elem):
    """Outside any generic: a scalar extracted from a tensor, spyreop ops, a tensor built back;
    and a spyreop.constant folded into the chain."""
    cst = "" if elem == DF16 else f"    %k = spyreop.constant 2.5 : {elem}\n"
    use_k = "%k" if elem != DF16 else "%s"
    text = (f"module {{\n  func.func @k(%a0: index, %out: index) attributes {{grid = [1]}} {{\n"
            "    %c0 = arith.constant 0 : index\n"
            + view("v0", "a0", (1,), elem) + tile("t0", "v0", (1,), (1,), "%c0", elem)
            + load("X", "t0", (1,), elem) + view("vo", "out", (1,), elem)
            + tile("to", "vo", (1,), (1,), "%c0", elem)
            + f"    %s = tensor.extract %X[%c0] : tensor<1x{elem}>\n" + cst
            + f"    %e = spyreop.exp %s : {elem}\n"
            f"    %d = spyreop.realdiv %e, {use_k} : {elem}\n"
            f"    %T = tensor.from_elements %d : tensor<1x{elem}>\n"
            + store("T", "to", (1,), elem) + "    return\n  }\n}\n")
    x = sample(elem, -2, 2)[:1]
    got = run(text, [x], DTYPES[elem])
    v = values_of(x, elem)[0]
    e = values_of(rounded([math.exp(v)], elem).view(DTYPES[elem]), elem)[0]
    k = 2.5 if elem != DF16 else v
    np.testing.assert_array_equal(bits(got), rounded([e / k], elem))


def test_slice_reduction():
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    for kind, scope in (("add", "in_slice"), ("max", "across_slice"), ("abs_max", "in_slice"),
                        ("sub", "across_slice")):
        text = (f"module {{\n  func.func @k(%a0: index, %out: index) attributes {{grid = [1]}} "
                "{\n    %c0 = arith.constant 0 : index\n"
                + view("v0", "a0", (4, 16), "f32")
                + tile("t0", "v0", (4, 16), (4, 16), "%c0, %c0", "f32")
                + load("X", "t0", (4, 16), "f32") + view("vo", "out", (4, 16), "f32")
                + tile("to", "vo", (4, 16), (4, 16), "%c0, %c0", "f32")
                + f"    %R = spyreop.slice_reduction %X {{reduction_kind = "
                f"#spyreop.reduction_kind<{kind}>, reduction_scope = "
                f"#spyreop.reduction_scope<{scope}>}} : tensor<4x16xf32> -> tensor<4x16xf32>\n"
                + store("R", "to", (4, 16), "f32") + "    return\n  }\n}\n")
        got = run(text, [x], np.float32)
        want = x.astype(np.float64).copy()
        red = {"add": lambda v: sum(v), "max": max, "abs_max": lambda v: max(abs(t) for t in v),
               "sub": lambda v: v[0] - sum(v[1:])}[kind]
        if scope == "in_slice":
            for r in range(4):
                want[r, 0] = red([float(t) for t in x[r]])
        else:
            for col in range(16):
                want[0, col] = red([float(t) for t in x[:, col]])
        np.testing.assert_array_equal(got, want.astype(np.float32))


# -- the verifier ---------------------------------------------------------------------------------

def _error(text: str) -> str:
    with pytest.raises(KtirError) as info:
        ktir.verify(ktir.parse_text(text, "bad.mlir"))
    return str(info.value)


def _fn(args: str, line: str) -> str:
    return f"func.func @f({args}) {{\n  {line}\n  return\n}}\n"


REFUSED = [
    ("%arg0: f16", "%0 = spyreop.softplus %arg0 beta 0.0 threshold 0.0 : f16",
     "attribute 'beta' failed to satisfy constraint: 32-bit float attribute which is non-zero"),
    ("%arg0: i32", "%0 = spyreop.layernormnorm %arg0 squares %arg0 scale %arg0 weight %arg0 "
     "bias %arg0 : i32",
     "operand #0 must be 16-bit float or IBM df16 float or 32-bit float, but got 'i32'"),
    ("%arg0: i32", "%0, %1 = spyreop.exx2 %arg0 : i32",
     "operand #0 must be 16-bit float or IBM df16 float or 32-bit float, but got 'i32'"),
    ("%arg0: f16", "%0 = spyreop.exx2_fused %arg0 : f16 -> f16",
     "result #0 must be A pair of df16 floats held as one value or A pair of 16-bit floats held "
     "as one value or A pair of 32-bit floats held as one value, but got 'f16'"),
    ("%arg0: f16", "%0 = spyreop.layernormscale_fused %arg0 : f16 -> f16",
     "operand #0 must be A pair of df16 floats held as one value or A pair of 16-bit floats "
     "held as one value or A pair of 32-bit floats held as one value, but got 'f16'"),
    ("%arg0: f16", "%0 = spyreop.exx2_fused %arg0 : f16 -> !spyreop.fp32_fused",
     "inferred type(s) '!spyreop.fp16_fused' are incompatible with return type(s) of operation "
     "'!spyreop.fp32_fused'"),
    ("%arg0: !spyreop.fp16_fused", "%0 = spyreop.layernormscale_fused %arg0 : "
     "!spyreop.fp16_fused -> f32",
     "inferred type(s) 'f16' are incompatible with return type(s) of operation 'f32'"),
    ("", "%c = spyreop.constant 0 : i32",
     "result #0 must be 16-bit float or 32-bit float, but got 'i32'"),
    ("", "%c = spyreop.constant 0 : index",
     "result #0 must be 16-bit float or 32-bit float, but got 'index'"),
    ("", "%c = spyreop.constant 0.0 : f64",
     "result #0 must be 16-bit float or 32-bit float, but got 'f64'"),
    ("", "%c = spyreop.constant dense<0.0> : tensor<1xf16>",
     "result #0 must be 16-bit float or 32-bit float, but got 'tensor<1xf16>'"),
    ("", "%c = spyreop.constant 0.0 : !spyreop.df16",
     "result #0 must be 16-bit float or 32-bit float, but got '!spyreop.df16'"),
    ("%a: f32", "%0 = spyreop.gelu %a : f32",
     "operand #0 must be 16-bit float or IBM df16 float, but got 'f32'"),
    ("%a: f32", "%0 = spyreop.softplus %a beta 1.0 threshold 20.0 : f32",
     "operand #0 must be 16-bit float or IBM df16 float, but got 'f32'"),
    ("%a: tensor<4xf16>", "%0 = spyreop.exp %a : tensor<4xf16>",
     "operand #0 must be 16-bit float or IBM df16 float or 32-bit float, but got "
     "'tensor<4xf16>'"),
    ("%a: f16, %b: f32", "%0 = spyreop.realdiv %a, %b : f16",
     "requires the same type for all operands and results"),
    ("%a: f16, %b: f32", "%0 = spyreop.select %a, %a, %b : f16",
     "requires the same type for all operands and results"),
    ("%a: f32", "%0 = spyreop.addi32toi32 %a, %a",
     "operand #0 must be 32-bit signless integer, but got 'f32'"),
    ("%a: i32", "%0 = spyreop.addi64toi64 %a, %a",
     "operand #0 must be 64-bit signless integer, but got 'i32'"),
    ("%a: i64", "%0 = spyreop.idx32toaddr %a base 0 stride 4",
     "operand #0 must be 32-bit signless integer, but got 'i64'"),
    ("%a: tensor<8xf16>", "%0 = spyreop.slice_reduction %a {reduction_kind = "
     "#spyreop.reduction_kind<add>, reduction_scope = #spyreop.reduction_scope<in_slice>} : "
     "tensor<8xf16> -> tensor<4xf16>", "requires the same type for all operands and results"),
    ("%a: f16", "%0 = spyreop.slice_reduction %a {reduction_kind = "
     "#spyreop.reduction_kind<add>, reduction_scope = #spyreop.reduction_scope<in_slice>} : "
     "f16 -> f16", "operand #0 must be ranked tensor"),
]


@pytest.mark.parametrize("args,line,message", REFUSED)
def test_verifier_refuses_with_a_located_error(args, line, message):
    err = _error(_fn(args, line))
    assert "bad.mlir:2:" in err, err
    assert message in err, err


def test_parser_refuses_bad_syntax_with_a_location():
    err = _error(_fn("%a: f16, %b: f16", "%0 = spyreop.compare <bigger> %a, %b : f16"))
    assert "bad.mlir:2:" in err and "unknown spyreop.compare predicate 'bigger'" in err
    err = _error(_fn("%a: i32", "%0 = spyreop.idx32toaddr %a base 0x1FFFFFFFF stride 4"))
    assert "bad.mlir:2:" in err and "does not fit in 32 bits" in err
    err = _error(_fn("%a: f16", "%0 = spyreop.slice_reduction %a {reduction_kind = "
                     "#spyreop.reduction_scope<add>} : f16 -> f16"))
    assert "takes a #spyreop.reduction_kind<...> attribute" in err


def test_arith_refuses_df16():
    """!spyreop.df16 is not a builtin float: arith's float ops refuse it as MLIR does."""
    err = _error(_fn("%a: !spyreop.df16", "%0 = arith.addf %a, %a : !spyreop.df16"))
    assert "bad.mlir:2:" in err and "must be float-like, but got !spyreop.df16" in err


@pytest.mark.parametrize("elem", ["f16", DF16])
def test_generic_form_runs_bit_identically(elem):
    """Kernels printed in MLIR's generic form (attributes in the frontend's spelling) read back
    and give the same bits."""
    from ktir_models.ktir.parse.printer import print_generic

    bodies = [f"%c = spyreop.compare <greaterthan> %x0, %x1 : {elem}\n"
              f"      %s = spyreop.softplus %x0 beta 0.5 threshold 1.0 : {elem}\n"
              f"      %r = spyreop.select %c, %s, %x1 : {elem}",
              f"%p = spyreop.exx2_fused %x0 : {elem} -> "
              f"{'!spyreop.fp16_fused' if elem == 'f16' else '!spyreop.df16_fused'}\n"
              f"      %q = spyreop.layernormscale_fused %p : "
              f"{'!spyreop.fp16_fused' if elem == 'f16' else '!spyreop.df16_fused'} -> {elem}\n"
              f"      %r = spyreop.realdiv %q, %x1 : {elem}"]
    a, b = sample(elem, -3, 3), sample(elem, -3, 3)
    for body in bodies:
        text = kernel([elem, elem], elem, body)
        generic = print_generic(ktir.parse_text(text, "k.mlir"))
        assert "#spyreop.compare_predicate<greaterthan>" in generic or "compare" not in body
        assert "beta = 0.5 : f32" in generic or "softplus" not in body
        np.testing.assert_array_equal(bits(run(generic, [a, b], DTYPES[elem])),
                                      bits(run(text, [a, b], DTYPES[elem])))


@pytest.mark.parametrize("elem", ["f16", DF16, "f32"])
def test_torch_back_end_gives_the_same_bits(elem):
    """The intrinsics run on the host for any array back end: torch's results are numpy's."""
    pytest.importorskip("torch")
    body = (f"%e = spyreop.exp %x0 : {elem}\n      %m, %q = spyreop.exx2 %x1 : {elem}\n"
            f"      %c = spyreop.compare <lesserthan> %e, %q : {elem}\n"
            f"      %r = spyreop.select %c, %e, %m : {elem}")
    a, b = sample(elem, -3, 3), sample(elem, -3, 3)
    text = kernel([elem, elem], elem, body)
    want = run(text, [a, b], DTYPES[elem])
    got = run(text, [a, b], DTYPES[elem], backend="torch", device=TORCH_DEVICE)
    np.testing.assert_array_equal(bits(got), bits(want))


def test_a_grid_of_cores_matches_one_core():
    """Four cores, each a quarter of the rows: a scalar intrinsic on each core's first element
    (stacked across the cores) feeds intrinsics in a generic body; the numpy reference of the
    whole."""
    rows, cols = 8, 32
    x = sample("f16", -4, 4)
    x = np.resize(x, (rows, cols)).astype(np.float16)
    q = rows // 4
    text = (f"module {{\n  func.func @k(%a0: index, %out: index) attributes {{grid = [4]}} {{\n"
            "    %c0 = arith.constant 0 : index\n"
            f"    %cq = arith.constant {q} : index\n"
            "    %id = ktdp.get_compute_tile_id : index\n"
            "    %row = arith.muli %id, %cq : index\n"
            + view("v0", "a0", (rows, cols)) + view("vo", "out", (rows, cols))
            + tile("t0", "v0", (rows, cols), (q, cols), "%row, %c0")
            + tile("to", "vo", (rows, cols), (q, cols), "%row, %c0")
            + load("X", "t0", (q, cols))
            + f"    %x00 = tensor.extract %X[%c0, %c0] : tensor<{q}x{cols}xf16>\n"
            "    %k = spyreop.exp %x00 : f16\n"
            + f"    %E = tensor.empty() : tensor<{q}x{cols}xf16>\n"
            "    %R = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, "
            "affine_map<(d0, d1) -> (d0, d1)>], iterator_types = [\"parallel\", \"parallel\"]} "
            f"ins(%X : tensor<{q}x{cols}xf16>) outs(%E : tensor<{q}x{cols}xf16>) {{\n"
            "    ^bb0(%x: f16, %o: f16):\n"
            "      %s = spyreop.sigmoid %x : f16\n"
            "      %d = spyreop.realdiv %x, %s : f16\n"
            "      %r = spyreop.realdiv %d, %k : f16\n"
            "      linalg.yield %r : f16\n"
            f"    }} -> tensor<{q}x{cols}xf16>\n"
            + store("R", "to", (q, cols)) + "    return\n  }\n}\n")
    got = run(text, [x], np.float16, runs=2)
    sig = rounded([_sig(v) for v in x.ravel().astype(np.float64)], "f16").view(np.float16)
    div = rounded([v / s for v, s in zip(x.ravel().astype(np.float64),
                                         sig.astype(np.float64))], "f16").view(np.float16)
    firsts = x[::q, 0].astype(np.float64)
    k = np.repeat(rounded([math.exp(v) for v in firsts], "f16").view(np.float16), q * cols)
    want = rounded([d / e for d, e in zip(div.astype(np.float64), k.astype(np.float64))], "f16")
    np.testing.assert_array_equal(bits(got).ravel(), want)


def test_latency_prices_transcendental_intrinsics_in_generic_bodies():
    """A body of spyreop.exp costs what a body of math.exp does (the walker's transcendental
    rule), more than a body of addf; compare is vector work like addf."""
    from ktir_models.ktir.latency import function_latency

    def cycles(body: str) -> float:
        module = ktir.parse_text(kernel(["f16"], "f16", body), "lat.mlir")
        ktir.verify(module)
        lat = function_latency(module.function("k"))
        (cost,) = [c for c in lat.top_ops if c.op == "linalg.generic"]
        return sum(cost.cycles.values())

    addf = cycles("%r = arith.addf %x0, %x0 : f16")
    assert cycles("%r = spyreop.exp %x0 : f16") == cycles("%r = math.exp %x0 : f16") > addf
    assert cycles("%r = spyreop.compare <equal> %x0, %x0 : f16") == addf


def test_every_op_form_checks():
    """One function using each op in each of its written forms (both idx32toaddr forms, both
    layernormscale forms, the three fused pairs, two results of exx2, an unnamed result)."""
    text = """func.func @forms(%h: f16, %d: !spyreop.df16, %s: f32, %i: i32, %l: i64,
                      %t: tensor<4x16xf16>) -> (!spyreop.df16, f32) {
  %a = spyreop.exp %s : f32
  %b = spyreop.gelu %d : !spyreop.df16
  %m, %q = spyreop.exx2 %d : !spyreop.df16
  %v = spyreop.layernormscale %q : !spyreop.df16
  %w = spyreop.layernormscale %m squares %q : !spyreop.df16
  %n = spyreop.layernormnorm %d squares %m scale %w weight %b bias %v : !spyreop.df16
  %p1 = spyreop.exx2_fused %h : f16 -> !spyreop.fp16_fused
  %p2 = spyreop.exx2_fused %d : !spyreop.df16 -> !spyreop.df16_fused
  %p3 = spyreop.exx2_fused %s : f32 -> !spyreop.fp32_fused
  %g1 = spyreop.layernormscale_fused %p1 : !spyreop.fp16_fused -> f16
  %g2 = spyreop.layernormscale_fused %p2 : !spyreop.df16_fused -> !spyreop.df16
  %g3 = spyreop.layernormscale_fused %p3 : !spyreop.fp32_fused -> f32
  %x1 = spyreop.idx32toaddr %i base 0xFFFFFFFF stride 2
  %x2 = spyreop.idx32toaddr %i base %x1 stride %i
  %x3 = spyreop.addi32toi32 %x1, %x2
  %x4 = spyreop.muli32toi32 %x3, %i
  %x5 = spyreop.addi64toi64 %l, %l
  %c = spyreop.compare <greaterequal> %g2, %n : !spyreop.df16
  %r = spyreop.select %c, %g2, %n : !spyreop.df16
  %k = spyreop.constant 0x3C00 : f16
  %u = spyreop.softplus %h beta 1.5 threshold 10.0 : f16
  spyreop.sigmoid %u : f16
  %z = spyreop.slice_reduction %t {reduction_kind = #spyreop.reduction_kind<mul>,
       reduction_scope = #spyreop.reduction_scope<across_slice>} : tensor<4x16xf16>
       -> tensor<4x16xf16>
  return %r, %g3 : !spyreop.df16, f32
}
"""
    module = ktir.parse_text(text, "forms.mlir")
    ktir.verify(module)
    ops = [op.name for op in module.function("forms").body.block.ops]
    assert ops.count("spyreop.idx32toaddr") == 2 and "spyreop.sigmoid" in ops
