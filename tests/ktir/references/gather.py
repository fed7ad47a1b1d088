"""Data-movement references: gathers, scatters and paged copies (exact, any dtype)."""

from __future__ import annotations

import numpy as np


def gather_2d(x: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``y[m, k] = x[rows[m, k], cols[m, k]]``."""
    return x[rows, cols]


def scatter_2d(dest: np.ndarray, rows: np.ndarray, cols: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A copy of ``dest`` with ``dest[rows[m, k], cols[m, k]] = x[m, k]`` (indices distinct)."""
    out = dest.copy()
    out[rows, cols] = x
    return out


def paged_to_contiguous(pages: dict[int, np.ndarray], page_ids: np.ndarray, page_len: int) -> np.ndarray:
    """Y[b, t, h, d] = X[page_ids[b, t // page_len], h, t % page_len, d].

    ``pages`` maps a page id to its ``[H, page_len, D]`` contents; returns ``[B, T, H, D]``.
    """
    heads, _, dim = next(iter(pages.values())).shape
    batches, n_pages = page_ids.shape
    sample = next(iter(pages.values()))
    out = np.empty((batches, n_pages * page_len, heads, dim), dtype=sample.dtype)
    for b in range(batches):
        for j in range(n_pages):
            out[b, j * page_len : (j + 1) * page_len] = pages[int(page_ids[b, j])].transpose(1, 0, 2)
    return out


def contiguous_to_pages(x: np.ndarray, page_ids: np.ndarray, page_len: int) -> dict[int, np.ndarray]:
    """Inverse of :func:`paged_to_contiguous`: page id -> ``[H, page_len, D]`` (ids distinct)."""
    pages = {}
    for b in range(page_ids.shape[0]):
        for j in range(page_ids.shape[1]):
            block = x[b, j * page_len : (j + 1) * page_len]  # [page_len, H, D]
            pages[int(page_ids[b, j])] = block.transpose(1, 0, 2)
    return pages
