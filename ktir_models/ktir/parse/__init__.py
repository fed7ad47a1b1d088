"""Pieces of the KTIR parser by job (the recursive-descent core is :mod:`ktir.parser`).

* :mod:`.lexer` — the tokenizer (one regular expression) and its per-line cache.
* :mod:`.ops_custom` — the custom assembly format of every op: one handler per op name.
* :mod:`.types` — type texts the frontend defines beyond the builtin ones: ``!ktdp.runtime_arg``
  and memrefs that name their memory space.
* :mod:`.ops_frontend` — custom-form handlers of ``ktdp.runtime_arg_extract``, ``func.call``
  and ``scf.parallel`` / ``scf.reduce``.
* :mod:`.generic_form` — MLIR's generic op form (``"dialect.op"(...) <{...}> ({...}) {...} :
  (...) -> ...``), turned into the same IR as each op's custom form.
* :mod:`.tile_types` — an access tile set larger than its result type, clipped to the type.
"""
