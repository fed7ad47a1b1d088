"""``python -m ktir_models`` is the same as the ``ktir-models`` console script."""

from .cli import main

main()
