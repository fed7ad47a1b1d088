"""The IR, the lowest layer: Module, Function, Op, Value and types (nodes.py), affine maps
and sets (affine.py), locations and errors (errors.py, source_loc.py: the producers' own MLIR
locations), and the op-kind registry (registry.py) that every dialect fills and every driver
reads. Imports nothing else of the emulator."""
