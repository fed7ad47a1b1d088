"""Array back ends: where the emulator's tensors live and what computes on them.

A back end is an object with a fixed vocabulary of numpy-named functions (``add``, ``matmul``,
``reduce``, ``reshape``, ...) plus the memory primitives the ktdp ops need (``memory``, ``typed``,
``strided``, ``take``, ``put``, ``assign``). Op builders (``dialects/<dialect>``) state each op's
semantics once, in that vocabulary, and pick the functions of their machine's back end at compile
time, so a compiled plan calls the back end directly.

* :class:`~.numpy_backend.NumpyBackend` -- numpy arrays on the host (the reference);
* :class:`~.torch_backend.TorchBackend` -- torch tensors on ``cpu``, ``cuda`` or ``mps``.

``make_backend(name, device)`` builds one and turns every unavailable choice into one clear
:class:`~ktir_models.errors.UserError`. ``f16_chain`` is the sequential f16 accumulation both back
ends share.

Each back end declares the fast tiers it supports as ``caps``, a frozen
:class:`~.capabilities.Capabilities` record (``host_arrays``, ``stacked``, ``tapes``,
``native_f16``); gates read ``caps_of(backend).<field>``, which gives a back end without ``caps``
the conservative default (every field False).
"""

from __future__ import annotations

from ...errors import UserError
from .capabilities import ALL, NONE, Capabilities, caps_of  # noqa: F401  (the back-end caps)

BACKENDS = ("numpy", "torch")
DEVICES = ("auto", "cpu", "cuda", "mps")


def _torch():
    try:
        import torch
    except ImportError:
        raise UserError("--backend torch needs torch, which is not installed "
                        "(pip install 'ktir-models[torch]')") from None
    return torch


def resolve_device(device: str) -> str:
    """``auto`` -> mps if available, else cuda, else cpu; an explicit device must be usable."""
    torch = _torch()
    mps = getattr(torch.backends, "mps", None)
    has_mps = bool(mps is not None and mps.is_available())
    if device == "auto":
        if has_mps:
            return "mps"
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else \
                f"built for CUDA {torch.version.cuda}"
            raise UserError(f"--device {device}: no CUDA device is available (torch "
                            f"{torch.__version__} is {build})")
        if ":" in device:
            k = int(device.split(":", 1)[1])
            if k >= torch.cuda.device_count():
                raise UserError(f"--device {device}: only {torch.cuda.device_count()} CUDA "
                                f"device(s) are visible")
        return device
    if device == "mps":
        if not has_mps:
            why = "this torch build has no MPS support" if mps is None or \
                not mps.is_built() else "no Metal device is available on this machine"
            raise UserError(f"--device mps: {why}")
        return device
    if device == "cpu":
        return device
    raise UserError(f"--device must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}")


def make_backend(name: str = "numpy", device: str = "auto"):
    """The back end ``name`` on ``device`` (see :func:`resolve_device`)."""
    if name == "numpy":
        if device not in ("auto", "cpu"):
            raise UserError(f"--backend numpy runs on the cpu only (got --device {device}); "
                            f"use --backend torch for {device}")
        from .numpy_backend import NumpyBackend

        return NumpyBackend()
    if name == "torch":
        dev = resolve_device(device)
        from .torch_backend import TorchBackend

        return TorchBackend(dev)
    raise UserError(f"--backend must be one of {', '.join(BACKENDS)}, got {name!r}")
