"""The torch array back end: tensors are torch tensors on one device (cpu, cuda or mps).

Every name of the back-end vocabulary (see :mod:`ktir_models.ktir.backends`) keeps numpy's
meaning: the same arguments, the same result dtype, the same rounding. Where no operand is a tensor
(scalar arithmetic, index math) the numpy function runs on the host, exactly as on the numpy back
end, so only tensor values live on the device.

Memory: an HBM region or LX scratchpad gets a device mirror of its bytes on first use, kept for the
machine's life (weights stay resident). On the cpu device the mirror *is* the host array
(``torch.from_numpy`` shares memory), so host reads and writes need no copies; on cuda/mps the
:class:`~ktir_models.ktir.exec.machine.Buffer` methods copy between host and device at the graph's inputs
and results only (:meth:`TorchBackend.push` / :meth:`TorchBackend.pull`). The written-byte masks
stay on the host: they are bookkeeping, not data. Invariant: a region has at most one mirror, also
when a grid's core threads (inter-tile runs) first touch it at once. ``separate_mirrors=True`` keeps
separate mirrors on the cpu too, so that machines without a GPU run (and test) the copy paths.

Numerics against numpy (docs/backends.md): f16 + - * / and casts round exactly as numpy does (torch
computes half ops in f32 and rounds once); f32 matmuls and reductions use the device's BLAS and
summation order, and transcendental functions the device's library, so they can differ in the last
f32 bits. f32 reductions accumulate in f64 as on numpy, except on mps (no f64), where they
accumulate in f32.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

from .capabilities import NONE

try:
    import torch
except ImportError:  # pragma: no cover - make_backend reports the missing extra
    torch = None

_NP_TO_TORCH: dict = {}


def _dtype_table() -> dict:
    if not _NP_TO_TORCH:
        pairs = {
            "float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
            "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
            "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
            "bfloat16": torch.bfloat16,
        }
        for name in ("uint16", "uint32", "uint64"):
            if hasattr(torch, name):
                pairs[name] = getattr(torch, name)
        _NP_TO_TORCH.update(pairs)
    return _NP_TO_TORCH


class TorchBackend:
    """torch tensors on ``device``; see the module docstring for memory and numerics."""

    name = "torch"
    # tensors live in torch (on a device, or host memory torch owns): no numpy-only fast tier
    caps = NONE

    def __init__(self, device: str = "cpu", separate_mirrors: bool = False):
        self.device = device
        self.tdevice = torch.device(device)
        # on the cpu the device memory is the host array, unless asked to copy as cuda/mps do
        self.shared = self.tdevice.type == "cpu" and not separate_mirrors
        self._mirror_lock = threading.Lock()
        self.array_type = torch.Tensor
        self.wide_float = np.dtype(np.float32 if self.tdevice.type == "mps" else np.float64)
        self._dt = _dtype_table()
        self._memo: dict = {}
        if self.tdevice.type == "cuda":
            # faithful f32 GEMMs: no TF32 and no reduced-precision reductions
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False

    def describe(self) -> str:
        return f"torch {torch.__version__} ({self.device})"

    # -- conversions --------------------------------------------------------------------------
    def tdtype(self, dtype):
        """The torch dtype of a numpy dtype (or anything np.dtype accepts); memoised, since
        steps ask on every call."""
        t = self._memo.get(dtype)
        if t is None:
            dt = np.dtype(dtype)
            try:
                t = self._dt[dt.name]
            except KeyError:
                raise NotImplementedError(f"the torch back end has no {dt.name} tensors") from None
            self._memo[dtype] = t
        return t

    def _t(self, x):
        """A tensor operand stays; numpy arrays move to the device; scalars become Python."""
        if isinstance(x, torch.Tensor):
            return x
        if isinstance(x, np.ndarray):
            if x.ndim == 0:
                return x[()].item()
            return self.asarray(x)
        if isinstance(x, np.generic):
            return x.item()
        return x

    def asarray(self, x, dtype=None):
        if isinstance(x, torch.Tensor):
            return x if dtype is None else x.to(self.tdtype(dtype))
        arr = np.asarray(x, dtype=dtype)
        if arr.dtype.name == "bfloat16":
            t = torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
        else:
            if not arr.flags.writeable or not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr).copy()
            t = torch.from_numpy(arr)
        return t.to(self.tdevice) if not self.shared else t

    def from_const(self, value):
        """A compile-time constant as a run-time value: arrays move to the device once (plan
        templates hold the result), scalars stay host scalars."""
        if isinstance(value, np.ndarray) and value.ndim > 0:
            return self.asarray(value)
        return value

    def to_host(self, x) -> np.ndarray:
        if isinstance(x, torch.Tensor):
            x = x.detach()
            if x.dtype == torch.bfloat16:
                import ml_dtypes

                return x.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
            return x.cpu().numpy()
        return np.asarray(x)

    def is_array(self, x) -> bool:
        return isinstance(x, torch.Tensor)

    def item(self, x):
        """A 0-d tensor element as a numpy scalar of the same dtype."""
        if isinstance(x, torch.Tensor):
            return self.to_host(x)[()]
        return x[()] if isinstance(x, np.ndarray) else x

    def astype(self, x, dtype):
        if isinstance(x, torch.Tensor):
            return x.to(self.tdtype(dtype))
        return np.asarray(x).astype(dtype, copy=False)

    def copy(self, x):
        if isinstance(x, torch.Tensor):
            return x.clone(memory_format=torch.contiguous_format)
        return np.array(x)

    def view_as(self, x, dtype):
        if isinstance(x, torch.Tensor):
            return x.contiguous().view(self.tdtype(dtype))
        return np.asarray(x).view(dtype)

    # -- elementwise --------------------------------------------------------------------------
    def np_dtype(self, tdtype) -> np.dtype:
        """The numpy dtype of a torch dtype."""
        for name, t in self._dt.items():
            if t == tdtype:
                if name == "bfloat16":
                    import ml_dtypes

                    return np.dtype(ml_dtypes.bfloat16)
                return np.dtype(name)
        raise NotImplementedError(f"no numpy dtype for {tdtype}")

    def _host_scalar(self, s, td, device):
        """A host scalar (Python or numpy) as a 0-d tensor of torch dtype ``td``."""
        return torch.tensor(s.item() if isinstance(s, (np.generic, np.ndarray)) else s,
                            dtype=td, device=device)

    def _binary(self, tfn, nfn):
        def fn(a, b, dtype=None):
            ta, tb = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
            if not (ta or tb):
                return nfn(a, b) if dtype is None else nfn(a, b, dtype=dtype)
            if isinstance(a, np.ndarray) and a.ndim:
                a, ta = self.asarray(a), True
            if isinstance(b, np.ndarray) and b.ndim:
                b, tb = self.asarray(b), True
            if dtype is not None:  # numpy: every operand converted straight to ``dtype``
                td = self.tdtype(dtype)
                dev = (a if ta else b).device
                a = a.to(td) if ta else self._host_scalar(a, td, dev)
                b = b.to(td) if tb else self._host_scalar(b, td, dev)
                return tfn(a, b)
            if ta and tb:
                return tfn(a, b)
            # a tensor and a host scalar: numpy's promotion (NEP 50: a Python scalar is weak,
            # a numpy scalar keeps its dtype), then both operands in that dtype
            t, s = (a, b) if ta else (b, a)
            rt = np.result_type(self.np_dtype(t.dtype), s)
            td = self.tdtype(rt)
            st = self._host_scalar(s, td, t.device)
            t = t.to(td)
            return tfn(t, st) if ta else tfn(st, t)

        return fn

    def _unary(self, tfn, nfn):
        def fn(x):
            if not isinstance(x, torch.Tensor):
                return nfn(x)
            return tfn(x)

        return fn

    def __getattr__(self, name):
        # elementwise functions are built once per backend object and then cached as attributes
        table = _ELEMENTWISE.get(name)
        if table is None:
            raise AttributeError(name)
        kind, tname, nfn = table
        tfn = _resolve(tname) if isinstance(tname, str) else tname
        fn = self._binary(tfn, nfn) if kind == 2 else self._unary(tfn, nfn)
        setattr(self, name, fn)
        return fn

    def where(self, cond, a, b):
        if not any(isinstance(v, torch.Tensor) for v in (cond, a, b)):
            return np.where(cond, a, b)
        cond = self._t(cond)
        if not isinstance(cond, torch.Tensor):
            cond = torch.tensor(bool(cond), device=self.tdevice)
        return torch.where(cond, self._t(a), self._t(b))

    def matmul(self, a, b):
        return torch.matmul(self._t(a), self._t(b))

    # -- shapes and creation ------------------------------------------------------------------
    def reshape(self, x, shape):
        if not isinstance(x, torch.Tensor):
            return np.reshape(x, shape)
        return torch.reshape(x, tuple(shape) if not isinstance(shape, int) else (shape,))

    def transpose(self, x, axes=None):
        if not isinstance(x, torch.Tensor):
            return np.transpose(x, axes)
        if axes is None:
            axes = tuple(reversed(range(x.ndim)))
        return x.permute(tuple(int(a) for a in axes))

    def broadcast_to(self, x, shape):
        if not isinstance(x, torch.Tensor):
            x = self.asarray(np.asarray(x))  # a numpy scalar keeps its dtype
        return torch.broadcast_to(x, tuple(shape))

    def moveaxis(self, x, src, dst):
        return torch.movedim(self._t(x), tuple(src), tuple(dst))

    def expand_dims(self, x, axis):
        x = self._t(x)
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        out_nd = x.ndim + len(axes)
        axes = sorted(a % out_nd for a in axes)
        shape = list(x.shape)
        for a in axes:
            shape.insert(a, 1)
        return x.reshape(shape)

    def ascontiguousarray(self, x):
        return self._t(x).contiguous()

    def full(self, shape, value, dtype):
        return torch.full(tuple(shape), _py(value), dtype=self.tdtype(dtype), device=self.tdevice)

    def zeros(self, shape, dtype):
        return torch.zeros(tuple(shape), dtype=self.tdtype(dtype), device=self.tdevice)

    def empty(self, shape, dtype):
        return torch.empty(tuple(shape), dtype=self.tdtype(dtype), device=self.tdevice)

    def stack(self, xs):
        return torch.stack([self._t(x) if not isinstance(x, torch.Tensor) else x for x in xs])

    def arange(self, n: int):
        return torch.arange(n, dtype=torch.int64, device=self.tdevice)

    # -- reductions ---------------------------------------------------------------------------
    def reduce(self, kind: str, x, axis: tuple, dtype=None):
        x = self._t(x)
        axis = tuple(axis)
        if not axis:  # torch reads an empty dim list as "every dim"; numpy as "none"
            return x if dtype is None else x.to(self.tdtype(dtype))
        if kind == "sum":
            return torch.sum(x, dim=axis, dtype=None if dtype is None else self.tdtype(dtype))
        if kind == "prod":
            if dtype is not None:
                x = x.to(self.tdtype(dtype))
            for d in sorted(axis, reverse=True):
                x = torch.prod(x, dim=d)
            return x
        if kind == "max":
            return torch.amax(x, dim=axis)
        if kind == "min":
            return torch.amin(x, dim=axis)
        if kind in ("nanmax", "nanmin"):
            nan = torch.isnan(x)
            fill = float("-inf") if kind == "nanmax" else float("inf")
            r = (torch.amax if kind == "nanmax" else torch.amin)(
                torch.where(nan, torch.full_like(x, fill), x), dim=axis)
            return torch.where(nan.all(dim=axis) if len(axis) == 1 else
                               _all_dims(nan, axis), torch.full_like(r, float("nan")), r)
        # bitwise and/or/xor folds: rare, exact on the host
        ufunc = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
        return self.asarray(ufunc.reduce(self.to_host(x), axis=axis))

    # -- memory -------------------------------------------------------------------------------
    def memory(self, owner):
        """The device mirror of an HBM region's / LX scratchpad's bytes (made on first use)."""
        dev = owner.dev
        if dev is None:
            # the cores of an inter-tile grid run as threads: two of them asking at once must get
            # the same mirror, or one core's writes land in a copy that is then dropped
            with self._mirror_lock:
                dev = owner.dev
                if dev is None:
                    dev = self._new_mirror(owner)
                    owner.dev_typed = {}
                    owner.dev = dev
        return dev

    def _new_mirror(self, owner):
        with warnings.catch_warnings():
            # read-only host arrays (memory-mapped weights) are never written through here:
            # stores into read-only regions fault before touching memory
            warnings.simplefilter("ignore", UserWarning)
            host = torch.from_numpy(owner.data)
        return host if self.shared else host.to(self.tdevice, copy=True)

    def typed(self, owner, dtype):
        dt = np.dtype(dtype)
        t = owner.dev_typed.get(dt) if owner.dev is not None else None
        if t is None:
            mem = self.memory(owner)
            n = mem.shape[0] - mem.shape[0] % dt.itemsize
            t = mem[:n].view(self.tdtype(dt))
            owner.dev_typed[dt] = t
        return t

    def strided(self, flat, offset: int, shape: tuple, strides: tuple):
        return flat.as_strided(tuple(shape), tuple(strides), flat.storage_offset() + int(offset))

    def _index(self, offsets):
        idx = torch.from_numpy(np.ascontiguousarray(offsets, dtype=np.int64))
        return idx if self.shared else idx.to(self.tdevice)

    def take(self, flat, offsets):
        return flat[self._index(offsets)]

    def put(self, flat, offsets, values) -> None:
        v = self._t(values)
        flat[self._index(offsets)] = v.to(flat.dtype) if isinstance(v, torch.Tensor) else v

    def assign(self, dst, value) -> None:
        v = self._t(value)
        if isinstance(v, torch.Tensor):
            dst.copy_(v)
        else:
            dst.fill_(v)

    def push(self, owner) -> None:
        """Host bytes -> device mirror (after a host write), when they are separate."""
        if owner.dev is not None and not self.shared:
            owner.dev.copy_(torch.from_numpy(owner.data).to(self.tdevice))

    def pull(self, owner) -> None:
        """Device mirror -> host bytes (before a host read), when they are separate."""
        if owner.dev is not None and not self.shared and owner.writable:
            owner.data[:] = owner.dev.cpu().numpy()

    def release(self, owner) -> None:
        """Forget the device mirror (the host copy is authoritative again)."""
        self.pull(owner)
        if not self.shared:
            owner.dev = None
            owner.dev_typed = {}

    def synchronize(self) -> None:
        if self.tdevice.type == "cuda":
            torch.cuda.synchronize(self.tdevice)
        elif self.tdevice.type == "mps":
            torch.mps.synchronize()


def _py(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, torch.Tensor):
        return v.item()
    return v


def _all_dims(mask, axis):
    for d in sorted(axis, reverse=True):
        mask = mask.all(dim=d)
    return mask


def _resolve(name: str):
    return getattr(torch, name)


# name -> (arity, torch function (name or callable), numpy function for scalar-only operands)
_ELEMENTWISE = {
    "add": (2, "add", np.add), "subtract": (2, "sub", np.subtract),
    "multiply": (2, "mul", np.multiply), "divide": (2, "true_divide", np.divide),
    "fmod": (2, "fmod", np.fmod), "maximum": (2, "maximum", np.maximum),
    "minimum": (2, "minimum", np.minimum), "fmax": (2, "fmax", np.fmax),
    "fmin": (2, "fmin", np.fmin), "power": (2, "pow", np.power),
    "equal": (2, "eq", np.equal), "not_equal": (2, "ne", np.not_equal),
    "greater": (2, "gt", np.greater), "greater_equal": (2, "ge", np.greater_equal),
    "less": (2, "lt", np.less), "less_equal": (2, "le", np.less_equal),
    "negative": (1, "neg", np.negative), "abs": (1, "abs", np.abs), "exp": (1, "exp", np.exp),
    "exp2": (1, "exp2", np.exp2), "log": (1, "log", np.log), "log2": (1, "log2", np.log2),
    "log10": (1, "log10", np.log10), "log1p": (1, "log1p", np.log1p),
    "sqrt": (1, "sqrt", np.sqrt), "tanh": (1, "tanh", np.tanh), "sin": (1, "sin", np.sin),
    "cos": (1, "cos", np.cos), "ceil": (1, "ceil", np.ceil), "floor": (1, "floor", np.floor),
    "trunc": (1, "trunc", np.trunc), "isnan": (1, "isnan", np.isnan),
    "isfinite": (1, "isfinite", np.isfinite),
}
