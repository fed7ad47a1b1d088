"""Our KTIR emitter for llama-family models.

``emit_program(cfg, mode, tokens, past, out_dir, name)`` writes a fixture directory (manifest.json
in the external format plus our fields, one ``node<i>.mlir`` per node); ``cached_program(cfg, mode,
tokens, past)`` returns such a directory from a cache keyed by everything that determines the
program. The model itself reads top to bottom in :mod:`.llama`; docs/emitter.md has the design.
"""

from .api import EMITTER_VERSION, MODES, cache_root, cached_program, emit_program, program_key
from .host import MASKED, attention_mask

__all__ = [
    "EMITTER_VERSION", "MODES", "MASKED", "attention_mask", "cache_root", "cached_program",
    "emit_program", "program_key",
]
