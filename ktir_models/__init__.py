"""ktir-models: run transformer checkpoints through KTIR programs on an emulated Spyre.

Layers (arrows point down, never up): ``cli`` -> ``model`` -> ``ktir``.
``ktir`` is the emulator and knows nothing about models.
"""

__version__ = "0.1.0"
