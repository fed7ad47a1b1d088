"""Checkpoints and weights: safetensors directories read tensor by tensor (checkpoint.py),
the HuggingFace hub client (hub.py), seeded synthetic checkpoints (synthetic.py, written with
safetensors_writer.py) and the tensors a config must hold (checkpoint_shapes.py)."""
