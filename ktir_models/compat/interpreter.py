"""``KTIRInterpreter``: the reference interpreter's Python API, running on our emulator.

Conventions (the reference's, docs/compat.md):

* ``load(source)``: ``source`` is KTIR text when it contains a newline or starts with
  ``module``, else a file path.
* ``execute_function(name, **kwargs)``: every ndarray is copied (never adopted) into a new
  stick-aligned HBM region and its argument receives the element index of its first element;
  other values bind declared scalars by their IR type; undeclared names are ignored; when no
  name matches a declared argument and the counts agree, values bind by position. Every
  ndarray comes back, inputs included, as a new array of its input's shape.
* ``memory`` is rebuilt by ``_prepare_execution(grid)`` at each call, before the ndarrays are
  placed (harnesses wrap that method to seed fixed addresses); HBM is lenient (stores to
  unmapped bytes map zeroed memory, as in the reference).
* Errors: ``RuntimeError`` before ``load``, ``ValueError`` for an unknown function and for
  every program or data error (carrying our located message).

Invariants: one machine per interpreter (its compiled plans are reused by later calls of the
same module); HBM and the LX contents are reset at every call.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..ktir import Machine
from ..ktir.latency import function_latency
from .latency import ExecutionModel, HardwareConfig, LatencyReport, report_from_node
from .memory import SpyreMemoryHierarchy
from .module_view import ModuleView

__all__ = ["KTIRInterpreter"]

NOT_LOADED = "No module loaded. Call load() first."


class KTIRInterpreter:
    """Load KTIR, run its functions on our emulator, report the call's latency."""

    def __init__(self, latency_config: HardwareConfig | None = None, trace_latency: bool = False,
                 parser=None):
        """``latency_config``: estimate each call's latency with these hardware parameters
        (None: no estimate). ``trace_latency``: also list one trace entry per executed op.
        ``parser``: accepted for compatibility (any object); our parser is always used."""
        self._module: ModuleView | None = None
        self.memory: SpyreMemoryHierarchy | None = None
        self._parser = parser
        self._latency_config = latency_config
        self._trace = bool(trace_latency)
        self._report: LatencyReport | None = None
        self._machine: Machine | None = None

    # -- the module
    @property
    def module(self) -> ModuleView | None:
        return self._module

    @module.setter
    def module(self, view: ModuleView | None) -> None:
        if view is not None and not isinstance(view, ModuleView):
            raise TypeError(f"module must be a parsed module view (from load() or "
                            f"MLIRFrontendParser().parse_module), not {type(view).__name__}")
        self._module = view

    def load(self, ktir_source: str) -> None:
        """Parse and verify KTIR text or a KTIR file (see the module docstring for which)."""
        if "\n" in ktir_source or ktir_source.lstrip().startswith("module"):
            self._module = ModuleView(ktir_source)
        else:
            self._module = ModuleView.from_file(ktir_source)

    def _loaded(self) -> ModuleView:
        if self._module is None:
            raise RuntimeError(NOT_LOADED)
        return self._module

    def arg_names(self, func_name: str) -> list[str]:
        """Argument names in declaration order, without ``%``."""
        return self._loaded().get_function(func_name).arg_names

    def tensor_input_output_sizes(self, func_name: str) -> dict[str, dict]:
        """``{base: {"shape": tuple, "dtype": str}}`` for the base operand of each first
        ``ktdp.construct_memory_view`` (shape from the static sizes, ``None`` for dynamic
        ones; dtype as the IR spells it)."""
        module = self._loaded()
        module.get_function(func_name)
        fn = module.parsed().functions[func_name]
        out: dict[str, dict] = {}
        for op in fn.walk():
            if op.name != "ktdp.construct_memory_view" or not op.groups.get("offset"):
                continue
            base = op.groups["offset"][0].name.lstrip("%")
            if base in out:
                continue
            t = op.result.type
            static = op.attrs.get("static_sizes")
            shape = tuple(static) if static is not None else tuple(t.shape)
            out[base] = {"shape": shape, "dtype": t.elem}
        return out

    # -- running
    def _prepare_execution(self, grid_shape: tuple) -> None:
        """A fresh memory for one call on a grid of ``grid_shape`` (HBM emptied, LX zeroed)."""
        num_cores = int(np.prod(grid_shape))
        if self._machine is None:
            self._machine = Machine(hbm="lenient")
        else:
            self._machine.reset_memory()
        self.memory = SpyreMemoryHierarchy(self._machine, num_cores)

    def execute_function(self, func_name: str, **kwargs) -> dict[str, np.ndarray]:
        """Run ``func_name`` on its whole grid; returns every ndarray argument's final
        contents (see the module docstring for the binding rules)."""
        module = self._loaded()
        view = module.get_function(func_name)
        fn = module.parsed().functions[func_name]
        self._prepare_execution(view.grid)
        machine = self._machine
        declared = view.arg_names
        if kwargs and declared and not any(k in declared for k in kwargs) \
                and len(kwargs) == len(declared):
            kwargs = dict(zip(declared, kwargs.values()))
        try:
            buffers = {name: place(machine, name, v) for name, v in kwargs.items()
                       if isinstance(v, np.ndarray)}
            args = {name: buffers[name].address if name in buffers else kwargs[name]
                    for name in declared if name in kwargs}
            machine.compile(fn).run(args)
            outputs = {name: buf.read()[:kwargs[name].size].reshape(kwargs[name].shape)
                       for name, buf in buffers.items()}
        except UserError as e:
            raise ValueError(str(e)) from e
        self._report = None
        if self._latency_config is not None:
            self._report = self._estimate(fn, kwargs)
        return outputs

    def _estimate(self, fn, kwargs: dict) -> LatencyReport:
        config = self._latency_config
        params = config.to_params()
        scalars = {k: v for k, v in kwargs.items() if not isinstance(v, np.ndarray)}
        node = function_latency(fn, params, args=scalars, trace=self._trace)
        return report_from_node(node, config, params, ExecutionModel())

    def get_latency_report(self) -> LatencyReport | None:
        """The last call's latency report (None without a ``latency_config`` or before a call)."""
        return self._report


def place(machine: Machine, name: str, array: np.ndarray):
    """A copy of ``array`` in a new stick-aligned HBM region (the caller's array is never
    adopted, so the kernel cannot write into it)."""
    buf = machine.hbm.allocate((max(array.size, 1),), array.dtype, name=name)
    if array.size:
        buf.write(array.reshape(-1))
    return buf
