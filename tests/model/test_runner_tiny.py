"""A tiny two-node KTIR program over a tiny llama checkpoint, shared by runner and CLI tests.

The program (m = 2 rows, hidden 64, vocab 256), logits-shaped so the whole forward path validates:
  node0: y = x * broadcast(norm)                 x = embed rows, norm = model.norm.weight [64]
  node1: z = y @ lm_head^T (matmul_transpose_b)  lm_head tied -> model.embed_tokens.weight [256, 64]
:func:`expected_logits` computes the same in numpy from those semantics (f32 compute, one f16
rounding per op).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ktir_models.model.config import ModelConfig

TINY = ModelConfig.from_hf_dict(
    dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=1,
         num_attention_heads=2, num_key_value_heads=1, head_dim=32, vocab_size=256,
         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
         max_position_embeddings=128),
    "tiny test config",
)
M, H, N = 2, 64, 256


def _view(name: str, ptr: str, rows: int, cols: int) -> str:
    return (
        f"    %{name} = ktdp.construct_memory_view %{ptr}, sizes: [{rows}, {cols}], strides: [{cols}, 1] {{\n"
        f"      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + {rows - 1} >= 0, d1 >= 0, -d1 + {cols - 1} >= 0)>,\n"
        f"      memory_space = #ktdp.spyre_memory_space<HBM>\n"
        f"    }} : memref<{rows}x{cols}xf16>\n"
    )


def _tile(name: str, view: str, rows: int, cols: int) -> str:
    return (
        f"    %{name} = ktdp.construct_access_tile %{view}[%c0, %c0] {{\n"
        f"      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + {rows - 1} >= 0, d1 >= 0, -d1 + {cols - 1} >= 0)>,\n"
        f"      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>\n"
        f"    }} : memref<{rows}x{cols}xf16> -> !ktdp.access_tile<{rows}x{cols}xindex>\n"
    )


NODE0 = (
    "module {\n"
    "  func.func @tiny_n0(%t0_ptr: index, %t1_ptr: index, %t3_ptr: index) attributes {grid = [1, 1]} {\n"
    "    %c0 = arith.constant 0 : index\n"
    + _view("vx", "t0_ptr", M, H) + _tile("ax", "vx", M, H)
    + f"    %x = ktdp.load %ax : !ktdp.access_tile<{M}x{H}xindex> -> tensor<{M}x{H}xf16>\n"
    f"    %vw = ktdp.construct_memory_view %t1_ptr, sizes: [{H}], strides: [1] {{\n"
    f"      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + {H - 1} >= 0)>, memory_space = #ktdp.spyre_memory_space<HBM>\n"
    f"    }} : memref<{H}xf16>\n"
    f"    %aw = ktdp.construct_access_tile %vw[%c0] {{\n"
    f"      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + {H - 1} >= 0)>,\n"
    f"      access_tile_order = affine_map<(d0) -> (d0)>\n"
    f"    }} : memref<{H}xf16> -> !ktdp.access_tile<{H}xindex>\n"
    f"    %w = ktdp.load %aw : !ktdp.access_tile<{H}xindex> -> tensor<{H}xf16>\n"
    f"    %wi = tensor.empty() : tensor<{M}x{H}xf16>\n"
    f"    %wb = linalg.broadcast ins(%w : tensor<{H}xf16>) outs(%wi : tensor<{M}x{H}xf16>) dimensions = [0]\n"
    f"    %y = arith.mulf %x, %wb : tensor<{M}x{H}xf16>\n"
    + _view("vy", "t3_ptr", M, H) + _tile("ay", "vy", M, H)
    + f"    ktdp.store %y, %ay : tensor<{M}x{H}xf16>, !ktdp.access_tile<{M}x{H}xindex>\n"
    "    return\n  }\n}\n"
)

NODE1 = (
    "module {\n"
    "  func.func @tiny_n1(%t3_ptr: index, %t2_ptr: index, %t4_ptr: index) attributes {grid = [1, 1]} {\n"
    "    %c0 = arith.constant 0 : index\n"
    + _view("vy", "t3_ptr", M, H) + _tile("ay", "vy", M, H)
    + f"    %y = ktdp.load %ay : !ktdp.access_tile<{M}x{H}xindex> -> tensor<{M}x{H}xf16>\n"
    + _view("vw", "t2_ptr", N, H) + _tile("aw", "vw", N, H)
    + f"    %w = ktdp.load %aw : !ktdp.access_tile<{N}x{H}xindex> -> tensor<{N}x{H}xf16>\n"
    f"    %zi = arith.constant dense<0.0> : tensor<{M}x{N}xf16>\n"
    f"    %z = linalg.matmul_transpose_b ins(%y, %w : tensor<{M}x{H}xf16>, tensor<{N}x{H}xf16>) "
    f"outs(%zi : tensor<{M}x{N}xf16>) -> tensor<{M}x{N}xf16>\n"
    + _view("vz", "t4_ptr", M, N) + _tile("az", "vz", M, N)
    + f"    ktdp.store %z, %az : tensor<{M}x{N}xf16>, !ktdp.access_tile<{M}x{N}xindex>\n"
    "    return\n  }\n}\n"
)

MANIFEST = {
    "tensors": [
        {"id": 0, "rows": M, "cols": H, "is_source": True},
        {"id": 1, "rows": 1, "cols": H, "is_source": True},
        {"id": 2, "rows": H, "cols": N, "is_source": True},
        {"id": 3, "rows": M, "cols": H, "is_source": False},
        {"id": 4, "rows": M, "cols": N, "is_source": False},
    ],
    "sources": [
        {"id": 0, "role": "embed"},
        {"id": 1, "role": "weight", "disk": "model.norm", "is_gemm": False},
        {"id": 2, "role": "weight", "name": "lm_head", "disk": "lm_head", "is_gemm": True},
    ],
    "nodes": [
        {"fn": "tiny_n0", "mlir": "node0.mlir", "args": [
            {"name": "t0_ptr", "tensor": 0, "is_output": False},
            {"name": "t1_ptr", "tensor": 1, "is_output": False},
            {"name": "t3_ptr", "tensor": 3, "is_output": True}]},
        {"fn": "tiny_n1", "mlir": "node1.mlir", "args": [
            {"name": "t3_ptr", "tensor": 3, "is_output": False},
            {"name": "t2_ptr", "tensor": 2, "is_output": False},
            {"name": "t4_ptr", "tensor": 4, "is_output": True}]},
    ],
    "result": 4,
    "num_sources": 3,
}




def write_tiny_program(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "manifest.json").write_text(json.dumps(MANIFEST, indent=1))
    (directory / "node0.mlir").write_text(NODE0)
    (directory / "node1.mlir").write_text(NODE1)
    return directory


def write_tiny_checkpoint(directory: Path, seed: int = 3) -> Path:
    from ktir_models.model.weights.synthetic import write_synthetic

    directory.mkdir(parents=True, exist_ok=True)
    write_synthetic(directory, TINY, seed=seed)
    return directory


def expected_logits(x: np.ndarray, norm: np.ndarray, lm_head: np.ndarray) -> np.ndarray:
    y = (x.astype(np.float32) * norm.astype(np.float32)[None, :]).astype(np.float16)
    return (y.astype(np.float32) @ lm_head.astype(np.float32).T).astype(np.float16)
