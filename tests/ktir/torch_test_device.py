"""The device the torch back end's tests run on.

``cpu`` unless the environment variable ``KTIR_MODELS_TEST_DEVICE`` names another torch device
(``cuda``, ``cuda:1``, ``mps``): on a machine with a GPU, setting it runs the same tests, with the
same references and tolerances, on the GPU (docs/backends.md, "On a machine with a GPU"). A device
that is named but absent fails those tests with the machine's own clear error; it never turns them
into skips.
"""

from __future__ import annotations

import os

TORCH_DEVICE = os.environ.get("KTIR_MODELS_TEST_DEVICE", "cpu")


def device_for(backend: str) -> str:
    """The device a machine of ``backend`` runs on in the tests (numpy has only the cpu)."""
    return TORCH_DEVICE if backend == "torch" else "cpu"
