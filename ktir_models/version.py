"""The package's version, in a module of its own so that any layer may read it without importing
the package root (which imports the public API, and through it every layer)."""

__version__ = "0.1.0"
