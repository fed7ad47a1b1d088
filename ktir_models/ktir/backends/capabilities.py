"""What a back end promises the emulator's fast tiers: one frozen record per back end.

Drivers and op builders gate their numpy-only fast paths on these fields, never on a back end's
name, so a new back end opts into a tier by declaring what it supports. A back end that declares
no ``caps`` gets :data:`NONE` (every field False): the plain per-core steps, which every back end
runs through its array vocabulary alone.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    """The fast tiers a back end supports (all False: only the plain per-core steps)."""

    #: tensors are numpy arrays in host memory (HBM views are numpy views of the regions'
    #: bytes): code that calls numpy directly on them (numpy-only fast paths, stacked loads and
    #: stores, f16 conversions) may run
    host_arrays: bool = False
    #: grids may run stacked by core and unrolled repeats rerolled side by side (stacked.py,
    #: reroll.py): the back end's arrays broadcast over a leading core axis as numpy's do, with
    #: the same per-core results
    stacked: bool = False
    #: plans may record tapes and replay them (tape.py): a step's results are arrays the tape may
    #: keep and hand out again on a repeated run
    tapes: bool = False
    #: the native f16 kernels (backends/seqmm.py, backends/f16_convert.py) may compute on this
    #: back end's tensors: they read and write host numpy arrays of f16
    native_f16: bool = False


NONE = Capabilities()
"""The conservative default: what a back end without a ``caps`` attribute gets."""

ALL = Capabilities(host_arrays=True, stacked=True, tapes=True, native_f16=True)
"""Every tier: the numpy reference back end."""


def caps_of(backend) -> Capabilities:
    """``backend.caps``, or :data:`NONE` when the back end declares none."""
    caps = getattr(backend, "caps", None)
    return NONE if caps is None else caps
