"""``ktir-models sweep``: validation at scale over models x programs x shapes.

A spec (spec.py, read with bounds by spec_reader.py) expands to cases; each case runs as one
``forward`` or ``generate`` of the project's CLI in its own process (worker.py, child.py) and
leaves one result file in the output directory (store.py), keyed by the content of everything
that decides it (keys.py), so reruns do only what is missing or changed. Cases run on this machine
(local_executor.py, the default) or as Ray tasks (ray_executor.py); reports.py and junit.py write
what a person or a CI system reads. A sweep writes only under ``--out`` (store.py) and to
``--junit`` (junit.py), never over what a case reads (inputs.py), and checks both before any case
runs.
"""

from .run import SweepOptions, run_sweep
from .spec import Case, SweepSpec, load_spec

__all__ = ["Case", "SweepOptions", "SweepSpec", "load_spec", "run_sweep"]
