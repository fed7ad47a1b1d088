"""The native C-order copy of strided 2-byte arrays (backends/copy16.c via strided_copy.py) gives
numpy's ``ascontiguousarray`` bytes for every layout the weight copies meet and more: transposes
whose extents are and are not multiples of the tile, blocked forms, reversed and sliced strides,
padded ranks, bf16 and NaN payloads (a copy never touches the bits)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ktir_models.ktir.backends import seqmm, strided_copy


@pytest.fixture(autouse=True)
def native():
    if not seqmm.available():
        pytest.skip(f"native library unavailable: {seqmm.unavailable_reason()}")


def weight(n: int, k: int, dtype=np.float16, seed: int = 0) -> np.ndarray:
    """[n, k] with every bit pattern likely, NaN payloads and infinities included."""
    bits = np.random.default_rng(seed).integers(0, 1 << 16, size=(n, k), dtype=np.uint16)
    return bits.view(dtype)


LAYOUTS = {
    "transpose 2048x512": lambda: weight(512, 2048).T,
    "transpose with edges 77x45": lambda: weight(45, 77).T,
    "transpose 33x32": lambda: weight(32, 33).T,
    "blocked [1, G, K, 32]": lambda: weight(256, 576).T.reshape(1, 576, 8, 32).transpose(0, 2, 1, 3),
    "blocked boxes [3, G, K, 32]": lambda: weight(3 * 64, 96).T.reshape(96, 3, 64)
    .transpose(1, 0, 2).reshape(3, 96, 2, 32).transpose(0, 2, 1, 3),
    "3-d transposed boxes": lambda: weight(6 * 40, 70).reshape(6, 40, 70).swapaxes(1, 2),
    "reversed and stepped": lambda: weight(300, 200)[::-1, ::3].T,
    "rows strided, columns contiguous": lambda: weight(64, 100)[::2],
    "bf16 transpose": lambda: weight(96, 130, ml_dtypes.bfloat16).T,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_native_copy_gives_numpys_bytes(layout):
    view = LAYOUTS[layout]()
    assert not view.flags.c_contiguous
    got = strided_copy.c_order(view)
    want = np.ascontiguousarray(view)
    assert got.flags.c_contiguous and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert not np.shares_memory(got, view)


def test_the_native_route_is_the_one_taken(monkeypatch):
    """Guard for the test above: a transposed f16 weight goes through the library's function."""
    calls = []
    real = strided_copy._function

    def counting():
        fn = real()
        calls.append(fn)
        return fn

    monkeypatch.setattr(strided_copy, "_function", counting)
    strided_copy.c_order(weight(64, 64).T)
    assert len(calls) == 1 and calls[0] is not None


@pytest.mark.parametrize("view", [weight(8, 8), weight(8, 8).astype(np.float32).T,
                                  weight(4, 4).reshape(2, 2, 2, 2, 1).transpose(4, 3, 2, 1, 0),
                                  weight(4, 4)[:0]], ids=["contiguous", "f32", "rank 5", "empty"])
def test_other_arrays_take_numpys_copy(view):
    got = strided_copy.c_order(view)
    np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(view).view(np.uint8))
