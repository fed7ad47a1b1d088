"""What the host binds for one pass of an emitted program, besides weights (see docs/emitter.md).

* ``embed``: embedding rows of the m token ids (f16 ``[m, hidden]``);
* ``cos``/``sin``: RoPE tables of positions ``past .. past+m-1`` (f16 ``[m, head_dim]``, HF layout);
* ``prefix_k``/``prefix_v`` of each layer: the KV cache ``[C, kv_dim]``, zeros before the first pass,
  then carried from pass to pass (the program writes rows ``past .. past+m-1``);
* ``attn_mask``: :func:`attention_mask` (f16 ``[m, C]``);
* the scalar ``position`` (only for programs emitted with a dynamic position): ``past``.
"""

from __future__ import annotations

import numpy as np

#: Additive mask value of a hidden key (the most negative finite f16, as in the external dumps).
MASKED = -65504.0


def attention_mask(past: int, m: int, capacity: int, window: int | None = None) -> np.ndarray:
    """f16 ``[m, capacity]``: the ``past`` valid cache rows visible (0.0), the rest ``MASKED``;
    with a sliding ``window`` (manifest ``host.sliding_window``) also the valid rows outside row
    i's window (query position ``past + i`` sees rows ``> past + i - window``).

    This is the external dumps' convention (the mask covers the prefix cache; the causal structure
    of the m fresh tokens is a constant inside the attention kernel)."""
    from ..inputs.runtime_inputs import hide_outside_window

    if past < 0 or m < 1 or capacity < past + m:
        raise ValueError(f"bad mask shape: past={past} m={m} capacity={capacity}")
    mask = np.full((m, capacity), MASKED, dtype=np.float16)
    mask[:, :past] = 0.0
    return hide_outside_window(mask, past, window)


def positions(past: int, m: int) -> np.ndarray:
    """Positions of the m new tokens."""
    return np.arange(past, past + m, dtype=np.int64)
