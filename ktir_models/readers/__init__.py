"""Robust readers of the files a user hands to ktir-models.

Each reader fails with one :class:`InputFileError` (a :class:`~ktir_models.errors.UserError`, exit
code 2) naming the file and the reason -- never a traceback from ``json``, ``zipfile``, ``gzip`` or
numpy -- and bounds what it reads before reading it (nesting depth, number size, decompressed
bytes, array sizes), so a hostile file cannot hang the process or exhaust its memory.

* :func:`read_json` -- JSON text: UTF-8, depth, integer digits, finite numbers, file size.
* :func:`read_npz` -- ``.npz`` archives of plain numeric arrays (no pickles, complex, strings,
  objects, records, 0-d or oversized arrays).
* :func:`read_gzip_bytes` -- gzip data of an exactly known decompressed size.
* :func:`check_safetensors_header` -- a safetensors file's header against the file's size.
"""

from .errors import InputFileError
from .gzip_file import read_gzip_bytes
from .json_file import read_json, read_json_text
from .npz_file import read_npz
from .safetensors_header import check_safetensors_header

__all__ = ["InputFileError", "check_safetensors_header", "read_gzip_bytes", "read_json", "read_json_text",
           "read_npz"]
