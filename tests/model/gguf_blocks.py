"""Block layouts of ggml's quantized types, written in numpy from the layout spec (llama.cpp's
``block_q8_0`` / ``block_q4_0`` / ``block_q4_K`` / ``block_q6_K`` and their ``dequantize_row_*``).

An independent reference for the dequantization tests (the package's decoder is compared with
these) and the writer of K-quant test tensors (the ``gguf`` package reads K-quants but cannot
write them). Each ``decode_*`` takes the raw bytes ``[rows, n_blocks * block_bytes]`` (uint8) and
returns float32 ``[rows, n_blocks * block_elems]``; each ``encode_*`` is a simple (not optimal)
quantizer producing valid blocks.
"""

from __future__ import annotations

import numpy as np

QK_K = 256


def _f16(blocks: np.ndarray, at: int) -> np.ndarray:
    """The little-endian float16 at byte ``at`` of every block, as float32 ``[n, 1]``."""
    return blocks[:, at:at + 2].copy().view("<f2").astype(np.float32)


def _blocks(raw: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    rows = raw.shape[0]
    return raw.reshape(-1, size), rows


# ------------------------------------------------------------------------------ Q8_0, Q4_0 (32)


def decode_q8_0(raw: np.ndarray) -> np.ndarray:
    """block_q8_0: d (f16), qs[32] int8; x = d * q."""
    b, rows = _blocks(raw, 34)
    q = b[:, 2:].view(np.int8).astype(np.float32)
    return (_f16(b, 0) * q).reshape(rows, -1)


def decode_q4_0(raw: np.ndarray) -> np.ndarray:
    """block_q4_0: d (f16), qs[16]; element j < 16 is the low nibble of qs[j], element j + 16 the
    high nibble; x = d * (nibble - 8)."""
    b, rows = _blocks(raw, 18)
    qs = b[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8
    return (_f16(b, 0) * q).reshape(rows, -1)


# ------------------------------------------------------------------------------ Q4_K (256)


def _q4k_scale_min(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 8 six-bit (scale, min) pairs packed in a block's 12 scale bytes ([n, 12] -> [n, 8] x 2)."""
    s = scales.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    mn = np.empty((s.shape[0], 8), np.int32)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            mn[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 0x0F) | ((s[:, j - 4] >> 6) << 4)
            mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, mn


def decode_q4_k(raw: np.ndarray) -> np.ndarray:
    """block_q4_K (144 bytes): d, dmin (f16), scales[12], qs[128]. Sub-block s (32 values) is
    ``d * sc[s] * q - dmin * m[s]``; the 64 values of chunk c come from qs[32c : 32c+32], the low
    nibbles giving sub-block 2c and the high nibbles sub-block 2c + 1."""
    b, rows = _blocks(raw, 144)
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = _q4k_scale_min(b[:, 4:16])
    qs = b[:, 16:].reshape(-1, 4, 32)
    q = np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float32)
    scale = (d * sc.astype(np.float32))[:, :, None]
    offset = (dmin * mn.astype(np.float32))[:, :, None]
    return (scale * q - offset).reshape(rows, -1)


def encode_q4_k(x: np.ndarray) -> np.ndarray:
    """float ``[rows, cols]`` (cols % 256 == 0) -> Q4_K bytes ``[rows, cols / 256 * 144]``."""
    rows = x.shape[0]
    sub = np.asarray(x, np.float32).reshape(-1, 8, 32)
    lo = np.minimum(sub.min(axis=2), 0.0)
    hi = np.maximum(sub.max(axis=2), 0.0)
    scale_f, min_f = (hi - lo) / 15.0, -lo
    d = (scale_f.max(axis=1) / 63.0).astype(np.float16)
    dmin = (min_f.max(axis=1) / 63.0).astype(np.float16)
    d32 = np.where(d > 0, d, 1).astype(np.float32)[:, None]
    dm32 = np.where(dmin > 0, dmin, 1).astype(np.float32)[:, None]
    sc = np.clip(np.rint(scale_f / d32), 1, 63).astype(np.int32)
    mn = np.clip(np.rint(min_f / dm32), 0, 63).astype(np.int32)
    eff_scale = (d.astype(np.float32)[:, None] * sc)[:, :, None]
    eff_min = (dmin.astype(np.float32)[:, None] * mn)[:, :, None]
    q = np.clip(np.rint((sub + eff_min) / np.where(eff_scale > 0, eff_scale, 1)), 0, 15).astype(np.uint8)
    scales = np.zeros((sub.shape[0], 12), np.uint8)
    for j in range(4):
        scales[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
        scales[:, j + 4] = (mn[:, j] & 63) | ((mn[:, j + 4] >> 4) << 6)
        scales[:, j + 8] = (sc[:, j + 4] & 0x0F) | ((mn[:, j + 4] & 0x0F) << 4)
    q = q.reshape(-1, 4, 2, 32)
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(-1, 128)
    out = np.concatenate([d.reshape(-1, 1).view(np.uint8), dmin.reshape(-1, 1).view(np.uint8), scales, qs], axis=1)
    return out.reshape(rows, -1)


# ------------------------------------------------------------------------------ Q6_K (256)


def decode_q6_k(raw: np.ndarray) -> np.ndarray:
    """block_q6_K (210 bytes): ql[128], qh[64], scales[16] (int8), d (f16). Each half h of 128
    values uses ql[64h : 64h+64] and qh[32h : 32h+32]: for l < 32 the values l, l+32, l+64, l+96 are
    the low nibble of ql[l], of ql[l+32], the high nibble of ql[l], of ql[l+32], each with two more
    bits from qh[l] (bits 0-1, 2-3, 4-5, 6-7); x = d * scales[e // 16] * (q - 32)."""
    b, rows = _blocks(raw, 210)
    ql = b[:, :128].reshape(-1, 2, 64).astype(np.int32)
    qh = b[:, 128:192].reshape(-1, 2, 32).astype(np.int32)
    scales = b[:, 192:208].view(np.int8).astype(np.float32)
    d = _f16(b, 208)
    q = np.empty((b.shape[0], 2, 128), np.int32)
    q[:, :, 0:32] = (ql[:, :, 0:32] & 0x0F) | (((qh >> 0) & 3) << 4)
    q[:, :, 32:64] = (ql[:, :, 32:64] & 0x0F) | (((qh >> 2) & 3) << 4)
    q[:, :, 64:96] = (ql[:, :, 0:32] >> 4) | (((qh >> 4) & 3) << 4)
    q[:, :, 96:128] = (ql[:, :, 32:64] >> 4) | (((qh >> 6) & 3) << 4)
    q = q.reshape(-1, 16, 16).astype(np.float32) - 32
    return ((d * scales)[:, :, None] * q).reshape(rows, -1)


def encode_q6_k(x: np.ndarray) -> np.ndarray:
    """float ``[rows, cols]`` (cols % 256 == 0) -> Q6_K bytes ``[rows, cols / 256 * 210]``."""
    rows = x.shape[0]
    sub = np.asarray(x, np.float32).reshape(-1, 16, 16)
    scale_f = np.abs(sub).max(axis=2) / 31.0
    d = (scale_f.max(axis=1) / 127.0).astype(np.float16)
    d32 = np.where(d > 0, d, 1).astype(np.float32)[:, None]
    sc = np.clip(np.rint(scale_f / d32), 1, 127).astype(np.int8)
    eff = (d.astype(np.float32)[:, None] * sc.astype(np.float32))[:, :, None]
    q = (np.clip(np.rint(sub / np.where(eff > 0, eff, 1)), -32, 31) + 32).astype(np.uint8)
    q = q.reshape(-1, 2, 128)
    ql = np.empty((q.shape[0], 2, 64), np.uint8)
    ql[:, :, 0:32] = (q[:, :, 0:32] & 0x0F) | ((q[:, :, 64:96] & 0x0F) << 4)
    ql[:, :, 32:64] = (q[:, :, 32:64] & 0x0F) | ((q[:, :, 96:128] & 0x0F) << 4)
    qh = ((q[:, :, 0:32] >> 4) | ((q[:, :, 32:64] >> 4) << 2) | ((q[:, :, 64:96] >> 4) << 4)
          | ((q[:, :, 96:128] >> 4) << 6)).astype(np.uint8)
    out = np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), sc.view(np.uint8),
                          d.reshape(-1, 1).view(np.uint8)], axis=1)
    return out.reshape(rows, -1)
