"""The op kinds, one module per dialect; importing this package registers every one of them.

Each dialect module defines, for each of its op kinds and side by side, the parts the drivers
need (registry.py): custom syntax, verification rule, plain builder, optional stacked and ragged
forms, cost. Dialect modules import only the layers below them (ir, registry, execute,
verify_rules, the stacked-value records, backends) -- never a driver (parser, verify, compile,
stacked, reroll, latency, machine) and never another module's private names.
"""

from __future__ import annotations

# registration imports, one line per dialect module (added as each dialect moves here)
from . import scf  # noqa: F401
from . import arith  # noqa: F401
from . import math  # noqa: F401
from . import tensor  # noqa: F401
from . import func  # noqa: F401
from . import runtime_arg  # noqa: F401
from . import ktdp  # noqa: F401
from . import linalg  # noqa: F401
from . import spyreop  # noqa: F401
