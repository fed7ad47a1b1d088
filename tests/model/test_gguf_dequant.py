"""Dequantization of GGUF blocks: the ``gguf`` package's decoder against numpy decoders written
from ggml's block layouts (tests/model/gguf_blocks.py), and our float16 path (row blocks, row
gathers, rounding once, non-finite values, unsupported types) against the package."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

import gguf_blocks
from ktir_models.errors import UserError
from ktir_models.model.gguf import dequant

BLOCK_BYTES = {Q.Q8_0: 34, Q.Q4_0: 18, Q.Q4_K: 144, Q.Q6_K: 210}
BLOCK_VALUES = {Q.Q8_0: 32, Q.Q4_0: 32, Q.Q4_K: 256, Q.Q6_K: 256}
# Where each block stores its float16 scale(s): bytes that must hold a finite value.
F16_FIELDS = {Q.Q8_0: (0,), Q.Q4_0: (0,), Q.Q4_K: (0, 2), Q.Q6_K: (208,)}
REFERENCE = {Q.Q8_0: gguf_blocks.decode_q8_0, Q.Q4_0: gguf_blocks.decode_q4_0,
             Q.Q4_K: gguf_blocks.decode_q4_k, Q.Q6_K: gguf_blocks.decode_q6_k}


def random_blocks(qtype, rows: int, blocks: int, seed: int) -> np.ndarray:
    """Seeded random block bytes with finite, moderate float16 scales (the quantized fields take
    every bit pattern)."""
    rng = np.random.default_rng(seed)
    size = BLOCK_BYTES[qtype]
    raw = rng.integers(0, 256, (rows * blocks, size), dtype=np.uint8)
    for at in F16_FIELDS[qtype]:
        scale = (rng.uniform(0.5, 2.0, rows * blocks) * 2.0 ** rng.integers(-12, -4, rows * blocks))
        raw[:, at:at + 2] = scale.astype("<f2").reshape(-1, 1).view(np.uint8)
    return raw.reshape(rows, blocks * size)


@pytest.mark.parametrize("qtype", [Q.Q8_0, Q.Q4_0, Q.Q4_K, Q.Q6_K], ids=lambda q: q.name)
def test_package_decoder_matches_the_block_layout(qtype) -> None:
    raw = random_blocks(qtype, rows=6, blocks=3, seed=int(qtype))
    ours = REFERENCE[qtype](raw)
    theirs = dequantize(raw, qtype)
    assert theirs.shape == (6, 3 * BLOCK_VALUES[qtype]) == ours.shape
    # Same association of the f32 products as ggml's C code: bit for bit.
    np.testing.assert_array_equal(theirs, ours)
    assert np.abs(ours).max() > 0


@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q6_K], ids=lambda q: q.name)
def test_k_quant_writer_round_trips(qtype) -> None:
    """The test's K-quant encoders write blocks that decode close to the input (the values the
    forward tests run on are near the seeded weights)."""
    x = np.random.default_rng(1).standard_normal((4, 512)).astype(np.float32) * 0.05
    raw = gguf_blocks.encode_q4_k(x) if qtype == Q.Q4_K else gguf_blocks.encode_q6_k(x)
    back = dequantize(raw, qtype)
    bound = {Q.Q4_K: 0.08, Q.Q6_K: 0.02}[qtype] * np.abs(x).max()
    assert np.abs(back - x).max() < bound


ALL_TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]


def stored(qtype, x: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(data as the reader exposes it, the package's float32 values) for one tensor."""
    if qtype == Q.F32:
        return x, x
    if qtype == Q.F16:
        return x.astype(np.float16), x.astype(np.float16).astype(np.float32)
    if qtype in (Q.Q2_K, Q.Q3_K, Q.Q5_K):  # no encoder: seeded bytes, scales made finite
        size = {Q.Q2_K: 84, Q.Q3_K: 110, Q.Q5_K: 176}[qtype]
        rng = np.random.default_rng(seed)
        raw = rng.integers(0, 256, (x.shape[0] * x.shape[1] // 256, size), dtype=np.uint8)
        tail = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q5_K: (0, 2)}[qtype]
        for at in tail:
            raw[:, at:at + 2] = np.full((raw.shape[0], 1), 2.0 ** -10, "<f2").view(np.uint8)
        raw = raw.reshape(x.shape[0], -1)
        return raw, dequantize(raw, qtype)
    if qtype == Q.Q4_K:
        raw = gguf_blocks.encode_q4_k(x)
    elif qtype == Q.Q6_K:
        raw = gguf_blocks.encode_q6_k(x)
    else:
        raw = quantize(x, qtype)
    return raw, dequantize(raw, qtype)


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda q: q.name)
def test_rows_to_f16_is_the_package_decode_rounded_once(qtype, monkeypatch) -> None:
    x = np.random.default_rng(2).standard_normal((10, 512)).astype(np.float32) * 0.1
    data, values = stored(qtype, x, seed=3)
    expected = values.astype(np.float16)
    monkeypatch.setattr(dequant, "ROW_CHUNK_BYTES", 3 * 512 * 4)  # 3 rows a block: 4 blocks
    out = dequant.rows_to_f16("f.gguf", "t", qtype, data, (10, 512))
    assert out.dtype == np.float16 and out.shape == (10, 512)
    np.testing.assert_array_equal(out, expected)
    rows = np.array([9, 0, 4, 4, 7])
    np.testing.assert_array_equal(dequant.rows_to_f16("f.gguf", "t", qtype, data, (10, 512), rows=rows),
                                  expected[rows])


def test_one_dimensional_tensors() -> None:
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_array_equal(dequant.rows_to_f16("f.gguf", "norm", Q.F32, x, (64,)), x.astype(np.float16))


def test_values_beyond_f16_are_refused_with_the_tensor_name() -> None:
    x = np.full((2, 32), 1e6, np.float32)
    with pytest.raises(UserError, match=r"f\.gguf: tensor 'big' \(Q8_0\) has values that are NaN or outside"):
        dequant.rows_to_f16("f.gguf", "big", Q.Q8_0, quantize(x, Q.Q8_0), (2, 32))


def test_unsupported_types_are_named() -> None:
    with pytest.raises(UserError, match=r"tensor 'w' has element type IQ2_XXS, which is not supported"):
        dequant.check_supported("f.gguf", "w", Q.IQ2_XXS)
