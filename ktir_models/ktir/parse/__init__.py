"""Pieces of the KTIR parser by job (the recursive-descent core is :mod:`ktir.parser`).

* :mod:`.lexer` — the tokenizer (one regular expression) and its per-line cache.
* :mod:`.ops_custom` — syntax pieces the ops' custom assembly formats share (each op's handler
  is registered by its dialect module).
* :mod:`.types` — type texts the frontend defines beyond the builtin ones: ``!ktdp.runtime_arg``
  and memrefs that name their memory space.
* :mod:`.ops_frontend` — syntax pieces several readers share: ``ktdp.runtime_arg_extract``'s
  kinds and the ``(T, ...) -> (R, ...)`` function type.
* :mod:`.numbers` — number literals: hexadecimal float bit patterns.
* :mod:`.generic_form` — MLIR's generic op form (``"dialect.op"(...) <{...}> ({...}) {...} :
  (...) -> ...``), turned into the same IR as each op's custom form.
* :mod:`.tile_types` — an access tile set larger than its result type, clipped to the type.
* :mod:`.locations` — MLIR's ``loc(...)`` syntax and ``#loc`` aliases (resolved at module end).
* :mod:`.bounds` — the bounds on a program text (size, lines, nesting, literals, ops, constants).
"""
