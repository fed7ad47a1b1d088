"""Range checks of the options (the API's, named as the CLI's) against the model, made before
anything is emitted or allocated.

Invariants a command may rely on after :func:`check_pass_options`: the pass's last position
``past + tokens - 1`` lies inside the model (``past + tokens <= max_position_embeddings``), the KV
capacity too, and the config's cost estimate is within bounds
(:func:`~ktir_models.model.config.check_size_bounds`). Each failure is one
:class:`~ktir_models.errors.UserError` naming the options, their values and the config field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UserError

if TYPE_CHECKING:
    from ..model.config import ModelConfig

#: numpy's seeded generators take any non-negative integer; the synthetic cache keys and
#: docs/weights.md promise a 32-bit seed, so larger ones are refused rather than silently hashed.
SEED_MAX = 2**32 - 1


def check_seed(seed: int, option: str = "--seed") -> None:
    """``seed`` is a valid synthetic-weights seed (an integer in [0, 2^32 - 1])."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise UserError(f"{option} {seed}: expected an integer in [0, {SEED_MAX}]")


def check_positions(cfg: ModelConfig, model: str, *, past: int, tokens: int,
                    what: str = "--past + --tokens") -> None:
    """Positions ``past .. past + tokens - 1`` exist in the model."""
    if past < 0 or tokens < 1:
        raise UserError(f"{what}: expected --past >= 0 and --tokens >= 1 (got {past} and {tokens})")
    limit = cfg.max_position_embeddings
    if past + tokens > limit:
        total = f"{past} + {tokens} = {past + tokens}" if past else f"{tokens}"
        raise UserError(
            f"{what} = {total}: beyond the model's positions "
            f"({model}: config field 'max_position_embeddings' = {limit})"
        )


def check_pass_options(cfg: ModelConfig, model: str, mode: str, tokens: int | None, past: int,
                       capacity: int | None = None) -> None:
    """The pass ``mode``/``tokens``/``past``/``capacity`` fits ``cfg`` (see the module
    docstring)."""
    from ..model.config import check_size_bounds
    from ..model.emit.api import pass_shape

    shape = pass_shape(mode, tokens, past, capacity)
    check_positions(cfg, model, past=shape.past, tokens=shape.m)
    if shape.capacity > cfg.max_position_embeddings:
        raise UserError(
            f"--capacity {shape.capacity}: more KV rows than the model has positions "
            f"({model}: config field 'max_position_embeddings' = {cfg.max_position_embeddings})"
        )
    check_size_bounds(cfg, model, tokens=shape.m, capacity=shape.capacity)


def scalar_value(name: str, text: str, scalar_type) -> int | float:
    """The value of ``--scalar NAME=TEXT`` for an argument of ``scalar_type`` (a ktir ScalarType),
    refused unless it is finite and representable in that type (1e300 is no f16, 2^40 no i32)."""
    import numpy as np

    from ..ktir.ir.nodes import ScalarType

    scalar = isinstance(scalar_type, ScalarType)
    dtype = scalar_type.dtype if scalar else None
    is_float = scalar and scalar_type.is_float
    try:
        value: int | float = float(text) if is_float else int(text, 0)
    except ValueError:
        raise UserError(f"--scalar {name}={text[:40]}: not a valid {scalar_type} value") from None
    if dtype is None or np.dtype(dtype).kind not in "fiu":
        return value
    if is_float:
        limit = float(np.finfo(dtype).max)
        if not np.isfinite(value) or abs(value) > limit:
            raise UserError(f"--scalar {name}={text[:40]}: outside the finite range of "
                            f"{scalar_type} (|x| <= {limit:g})")
    else:
        info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
        if info is not None and not info.min <= value <= info.max:
            raise UserError(f"--scalar {name}={text[:40]}: outside the range of {scalar_type} "
                            f"[{info.min}, {info.max}]")
    return value
