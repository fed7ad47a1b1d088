"""f16 unary math ops through their tables (dialects/math.py ``f16_table``): on the numpy back
end an f16 array is looked up in the op's 65536-entry table instead of being widened, evaluated
in f32 and rounded. The tables are filled by the op's own evaluation, so the claim to test is
that an element's result does not depend on the array it sits in: every f16 value, in arrays of
many lengths and layouts, against numpy's f32 function rounded once (written here from the op's
definition, independently of the emulator)."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.ktir.backends import f16_convert
from ktir_models.ktir.dialects import math as ktir_math

from test_machine import load, program, run, store, tile, ty, view

EVERY_F16 = np.arange(65536, dtype=np.uint16).view(np.float16)


# the f32 (or f64 for erf) function of each op, applied to the widened operand
REFERENCES = {
    "math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.log2": np.log2,
    "math.log10": np.log10, "math.log1p": np.log1p, "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: np.float32(1.0) / np.sqrt(x), "math.tanh": np.tanh,
    "math.sin": np.sin, "math.cos": np.cos, "math.absf": np.abs,
    # erf is defined by its implementation (scipy's where installed, else the C library's)
    "math.erf": ktir_math.erf_f64,
    "math.ceil": np.ceil, "math.floor": np.floor,
    "math.round": lambda x: np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)),
}


def reference(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return REFERENCES[name](x.astype(np.float32)).astype(np.float16)


def unary_program(name: str, shape) -> ktir.Function:
    body = (view("vx", "x", shape) + view("vo", "o", shape)
            + tile("tx", "vx", shape, shape, ", ".join(["%c0"] * len(shape)))
            + tile("to", "vo", shape, shape, ", ".join(["%c0"] * len(shape)))
            + load("v", "tx", shape)
            + f"    %r = {name} %v : tensor<{ty(shape)}>\n"
            + store("r", "to", shape))
    return program("%x: index, %o: index", body)


def run_unary(name: str, x: np.ndarray) -> np.ndarray:
    m = ktir.Machine()
    bx = m.hbm.allocate_from(np.ascontiguousarray(x), name="x")
    bo = m.hbm.allocate(x.shape, "float16", name="o")
    run(unary_program(name, x.shape), m, bx.address, bo.address)
    return bo.read()


def bits(a) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


@pytest.fixture(autouse=True)
def _native():
    if f16_convert.native_from() is None:
        pytest.skip("the native library is not built here: f16 ops stay on numpy")


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_every_f16_value_through_the_table_is_numpys(name):
    ktir_math._TABLES.pop(name, None)
    got = run_unary(name, EVERY_F16.reshape(256, 256))
    assert name in ktir_math._TABLES  # the lookup ran, not the evaluation
    np.testing.assert_array_equal(bits(got), bits(reference(name, EVERY_F16).reshape(256, 256)))


@pytest.mark.parametrize("name", ["math.exp", "math.tanh", "math.sin", "math.rsqrt"])
def test_short_and_odd_arrays_are_numpys(name):
    """Lengths around the vector widths and tails, each holding values spread over the whole
    f16 range: an element's bits do not depend on where numpy's loops put it."""
    rng = np.random.default_rng(7)
    for shape in [(1,), (7,), (8,), (9,), (31,), (64,), (65,), (3, 13), (2, 1, 70)]:
        x = rng.integers(0, 65536, size=shape, dtype=np.uint16).view(np.float16)
        np.testing.assert_array_equal(bits(run_unary(name, x)), bits(reference(name, x)),
                                      err_msg=f"{name} {shape}")


def test_table_lookups_read_any_layout():
    table = ktir_math.f16_table("math.exp", lambda x: reference("math.exp", x))
    grid = EVERY_F16.reshape(256, 256)
    for view_ in (grid, grid.T, grid[::3, 1::2], grid[:, :1]):
        np.testing.assert_array_equal(bits(f16_convert.lookup(table, view_)),
                                      bits(reference("math.exp", view_)))
    assert f16_convert.lookup(table, grid.astype(np.float32)) is None  # not f16: numpy's job
    with pytest.raises(ValueError, match="65536"):
        f16_convert.lookup(table[:100].copy(), grid)


def test_a_table_is_read_only():
    table = ktir_math.f16_table("math.exp", lambda x: reference("math.exp", x))
    with pytest.raises(ValueError):
        table[0] = 1
