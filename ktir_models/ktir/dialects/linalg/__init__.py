"""linalg: the matmul family and matvec, reduce, broadcast, transpose, fill, the named
elementwise ops, generic, index and yield. One module per group of op kinds, each kind's parts
(syntax, verification rule, builder, stacked form, cost) side by side:

* :mod:`.matmul`  -- matmul, matmul_transpose_b, batch_matmul, matvec (numerics there);
* :mod:`.reduce`  -- reduce, and the reduction helpers the ragged steps build on;
* :mod:`.layout`  -- broadcast, transpose;
* :mod:`.named`   -- fill and the named elementwise ops;
* :mod:`.generic` -- generic, index, yield;
* :mod:`.syntax`  -- the clause syntax every linalg op shares; :mod:`.numerics` -- dtypes and
  the f32 widening the op modules share.

``outs`` of broadcast/transpose/add/max/fill only give the shape; of matmul, matvec and reduce it
is the accumulator / init.
"""

from __future__ import annotations

from . import generic, layout, matmul, named, reduce  # noqa: F401  (registration)
from .matmul import as_batch3, blas_matmul_step, is_zero_const, native_matmul_step  # noqa: F401
from .numerics import wide, wide_of  # noqa: F401
from .reduce import COMBINERS, REDUCERS, accumulator, body_combiner, fast_reduce  # noqa: F401
