"""Back-end capabilities (ktir/backends/capabilities.py): the fast tiers gate on ``caps``, and a
back end that declares none gets the conservative default -- plain per-core steps, the same
bytes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_stacked import bits, softmax_rows

from ktir_models import ktir
from ktir_models.ktir.backends import NONE, Capabilities, caps_of
from ktir_models.ktir.backends.numpy_backend import NumpyBackend

FIELDS = ("host_arrays", "stacked", "tapes", "native_f16")


def test_fields_and_defaults():
    names = {f.name for f in dataclasses.fields(Capabilities)}
    assert set(FIELDS) <= names
    assert not any(getattr(Capabilities(), f) for f in names)
    with pytest.raises(dataclasses.FrozenInstanceError):
        NONE.stacked = True  # type: ignore[misc]


def test_numpy_declares_every_tier():
    assert all(getattr(caps_of(NumpyBackend()), f) for f in FIELDS)


def test_torch_declares_no_numpy_tier():
    pytest.importorskip("torch")
    from ktir_models.ktir.backends.torch_backend import TorchBackend

    assert not any(getattr(caps_of(TorchBackend("cpu")), f) for f in FIELDS)


class Undeclared(NumpyBackend):
    """The numpy back end's vocabulary with no capabilities declared (``caps`` None, as a back
    end written before capabilities existed would read through a base class default)."""

    caps = None


def test_a_back_end_without_caps_gets_none_and_the_same_bytes():
    assert caps_of(object()) is NONE
    assert caps_of(Undeclared()) is NONE
    x = (np.random.default_rng(3).standard_normal((4, 16)) * 3).astype(np.float16)
    outs = []
    for backend in (Undeclared(), NumpyBackend()):
        m = ktir.Machine(backend=backend)
        src = m.hbm.allocate_from(x, name="x")
        out = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="o")
        plan = m.compile(softmax_rows())
        for _ in range(3):  # the second run tiers up, the third may replay a tape
            plan.run([src.address, out.address])
        if isinstance(backend, Undeclared):
            assert plan._c.stacked is None and plan._c.rerolled is None
            assert plan.replays == 0 and not m.native_matmul
        else:
            assert plan._c.stacked is not None
        outs.append(out.read())
    np.testing.assert_array_equal(bits(outs[0]), bits(outs[1]))
