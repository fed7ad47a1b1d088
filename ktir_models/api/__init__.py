"""The Python API of ktir-models: one module per command (``serve``, ...)."""
