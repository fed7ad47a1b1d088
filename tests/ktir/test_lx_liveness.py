"""LX accounting as an allocator would do it (ktir/verify/lx_liveness.py), from first principles.

Every expected figure below is worked out by hand from the rules in the module docstring: a value
holds a buffer from its definition to its last use; an elementwise result may take the buffer of a
same-sized operand dying at that op; ``tensor.splat`` is a full tensor; ``arith.constant`` is free.
The strict model (the earlier accounting) is checked on the same programs.
"""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.errors import UserError
from ktir_models.ktir.verify.lx_liveness import account

MIB = 1 << 20
T = "tensor<32x8192xf16>"  # 512 KiB
T_BYTES = 32 * 8192 * 2


def _view_load(name: str, ptr: str, shape=(32, 8192)) -> str:
    r, c = shape
    box = f"(d0 >= 0, -d0 + {r - 1} >= 0, d1 >= 0, -d1 + {c - 1} >= 0)"
    return f"""
    %view_{name} = ktdp.construct_memory_view %{ptr}, sizes: [{r}, {c}], strides: [{c}, 1] {{
      coordinate_set = affine_set<(d0, d1) : {box}>, memory_space = #ktdp.memory_space<global>
    }} : memref<{r}x{c}xf16>
    %tile_{name} = ktdp.construct_access_tile %view_{name}[%c0, %c0] {{
      access_tile_set = affine_set<(d0, d1) : {box}>, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<{r}x{c}xf16> -> !ktdp.access_tile<{r}x{c}xindex>
    %{name} = ktdp.load %tile_{name} : !ktdp.access_tile<{r}x{c}xindex> -> tensor<{r}x{c}xf16>
"""


def _store(value: str, ptr: str, shape=(32, 8192)) -> str:
    r, c = shape
    box = f"(d0 >= 0, -d0 + {r - 1} >= 0, d1 >= 0, -d1 + {c - 1} >= 0)"
    return f"""
    %view_o = ktdp.construct_memory_view %{ptr}, sizes: [{r}, {c}], strides: [{c}, 1] {{
      coordinate_set = affine_set<(d0, d1) : {box}>, memory_space = #ktdp.memory_space<global>
    }} : memref<{r}x{c}xf16>
    %tile_o = ktdp.construct_access_tile %view_o[%c0, %c0] {{
      access_tile_set = affine_set<(d0, d1) : {box}>, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<{r}x{c}xf16> -> !ktdp.access_tile<{r}x{c}xindex>
    ktdp.store %{value}, %tile_o : tensor<{r}x{c}xf16>, !ktdp.access_tile<{r}x{c}xindex>
"""


def _function(args: list[str], body: str) -> ktir.ir.Function:
    text = ("module {\n  func.func @k(" + ", ".join(f"%{a}: index" for a in args) +
            ") attributes {grid = [1]} {\n    %c0 = arith.constant 0 : index\n" + body +
            "    return\n  }\n}\n")
    module = ktir.parse_text(text, "lx.mlir")
    ktir.verify(module)
    return module.only_function


def swiglu(extra: bool = False) -> ktir.ir.Function:
    """The SwiGLU node of a llama-3.2-1b prefill (scratchy node 12 at 32 rows): silu(gate) * up
    with silu(x) = x / (1 + exp(-x)); ``extra`` multiplies by a third loaded tensor."""
    body = _view_load("gate", "g") + _view_load("up", "u")
    if extra:
        body += _view_load("more", "m")
    body += f"""
    %neg = arith.negf %gate : {T}
    %e = math.exp %neg : {T}
    %one = arith.constant 1.0 : f16
    %onet = tensor.splat %one : {T}
    %denom = arith.addf %onet, %e : {T}
    %silu = arith.divf %gate, %denom : {T}
    %y = arith.mulf %silu, %up : {T}
"""
    if extra:
        body += f"    %y2 = arith.mulf %y, %more : {T}\n"
    body += _store("y2" if extra else "y", "o")
    return _function(["g", "u"] + (["m"] if extra else []) + ["o"], body)


def test_swiglu_fits_at_exactly_2_mib():
    """Live tensors (512 KiB each): gate, up; negf +1 (gate lives on, for the divf); exp takes
    neg's buffer; the splat +1 -> 4 = 2 MiB; addf takes onet's (or e's) buffer and frees the other
    -> 3; divf takes gate's or denom's -> 2; mulf -> 1. Peak 2 MiB, exactly the capacity."""
    fn = swiglu()
    assert account(fn, 2 * MIB).peak == 2 * MIB
    r = np.random.default_rng(20)
    gate = r.standard_normal((32, 8192)).astype(np.float16)
    up = r.standard_normal((32, 8192)).astype(np.float16)
    m = ktir.Machine()
    g, u = m.hbm.allocate_from(gate, name="gate"), m.hbm.allocate_from(up, name="up")
    o = m.hbm.allocate((32, 8192), "float16", name="out")
    stats = m.compile(fn).run({"g": g.address, "u": u.address, "o": o.address})
    assert stats.lx_high_water == [2 * MIB]
    x = gate.astype(np.float32)
    ref = x / (1 + np.exp(-x)) * up.astype(np.float32)
    np.testing.assert_allclose(o.read().astype(np.float32), ref, rtol=2e-2, atol=2e-2)


def test_swiglu_strict_model_counts_the_result_before_the_dying_operands():
    """The earlier accounting: at the addf gate, up, e, onet are live and denom is added first:
    5 x 512 KiB = 2621440 bytes, over the capacity (the false overflow of issue 20)."""
    acc = account(swiglu(), 2 * MIB, "strict")
    assert acc.peak == 5 * T_BYTES == 2621440
    m = ktir.Machine(lx_model="strict")
    g, u = (m.hbm.allocate_from(np.zeros((32, 8192), np.float16), name=n) for n in "gu")
    o = m.hbm.allocate((32, 8192), "float16", name="out")
    with pytest.raises(ktir.EmulationFault, match="LX scratchpad overflow") as info:
        m.compile(swiglu()).run({"g": g.address, "u": u.address, "o": o.address})
    assert info.value.op == "arith.addf"


def test_one_tensor_more_faults_naming_the_op_and_the_live_values():
    """With a third input live until the end: gate, up, more, neg->e (in place), then the splat
    makes five 512 KiB tensors (2.5 MiB): the splat is the first op over the capacity."""
    fn = swiglu(extra=True)
    acc = account(fn, 2 * MIB)
    assert acc.peak == 5 * T_BYTES
    m = ktir.Machine()
    bufs = [m.hbm.allocate_from(np.zeros((32, 8192), np.float16), name=n) for n in "gum"]
    o = m.hbm.allocate((32, 8192), "float16", name="out")
    with pytest.raises(ktir.EmulationFault) as info:
        m.compile(fn).run({"g": bufs[0].address, "u": bufs[1].address, "m": bufs[2].address,
                           "o": o.address})
    msg = str(info.value)
    assert info.value.op == "tensor.splat"
    assert "LX scratchpad overflow at tensor.splat" in msg and "2621440 bytes" in msg
    for name in ("%gate", "%up", "%more", "%neg=%e", "%onet"):
        assert name in msg, (name, msg)
    assert not o.region.mask.any()  # the fault stopped the node before its store


def _elementwise(body: str) -> ktir.ir.Function:
    return _function(["a", "o"], _view_load("x", "a", (16, 64)) + body)


S = "tensor<16x64xf16>"  # 2 KiB
S_BYTES = 16 * 64 * 2


def test_in_place_only_when_the_operand_dies_there():
    dies = _elementwise(f"    %w = arith.mulf %x, %x : {S}\n" + _store("w", "o", (16, 64)))
    lives = _elementwise(f"    %w = arith.mulf %x, %x : {S}\n    %z = arith.addf %w, %x : {S}\n"
                         + _store("z", "o", (16, 64)))
    assert account(dies, MIB).peak == S_BYTES          # w writes over x
    assert account(lives, MIB).peak == 2 * S_BYTES     # x is read again: w needs its own buffer
    assert account(dies, MIB, "strict").peak == 2 * S_BYTES


def test_a_different_size_never_takes_the_buffer():
    fn = _elementwise(f"    %w = arith.extf %x : {S} to tensor<16x64xf32>\n"
                      f"    %h = arith.truncf %w : tensor<16x64xf32> to {S}\n"
                      + _store("h", "o", (16, 64)))
    # x (2 KiB) + w (4 KiB) while extf runs; w + h (2 KiB) while truncf runs
    assert account(fn, MIB).peak == 3 * S_BYTES


def test_matmul_inputs_do_not_give_their_buffers_to_the_result():
    """A matmul reads all of its inputs while it writes the result: no in-place; its zero
    ``outs`` constant is free (the fill of the result's own buffer)."""
    body = (_view_load("x", "a", (16, 64)) + _view_load("w", "b", (64, 16))
            + "    %z = arith.constant dense<0.0> : tensor<16x16xf32>\n"
            "    %mm = linalg.matmul ins(%x, %w : tensor<16x64xf16>, tensor<64x16xf16>) "
            "outs(%z : tensor<16x16xf32>) -> tensor<16x16xf32>\n"
            "    %h = arith.truncf %mm : tensor<16x16xf32> to tensor<16x16xf16>\n"
            + _store("h", "o", (16, 16)))
    fn = _function(["a", "b", "o"], body)
    assert account(fn, MIB).peak == 2 * S_BYTES + 16 * 16 * 4


def _loop(init_used_after: bool) -> ktir.ir.Function:
    """acc = acc + x over 4 trips; x is loaded before the loop (live through it)."""
    after = f"    %r2 = arith.addf %r, %init : {S}\n" if init_used_after else \
        f"    %r2 = arith.addf %r, %r : {S}\n"
    body = (_view_load("x", "a", (16, 64)) + _view_load("init", "b", (16, 64))
            + "    %c1 = arith.constant 1 : index\n    %c4 = arith.constant 4 : index\n"
            f"    %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> ({S}) {{\n"
            f"      %n = arith.addf %acc, %x : {S}\n"
            f"      scf.yield %n : {S}\n    }}\n" + after + _store("r2", "o", (16, 64)))
    return _function(["a", "b", "o"], body)


def test_loop_accumulator_is_counted_once():
    """x, and one accumulator buffer: init hands its buffer to the first trip's iter_arg, the
    addf writes over acc (dying there), the yield carries it to the next trip and out as %r."""
    assert account(_loop(False), MIB).peak == 2 * S_BYTES
    # strict: x + init + the iter_arg charged on entry + n = 4 tensors
    assert account(_loop(False), MIB, "strict").peak == 4 * S_BYTES


def test_an_init_used_after_the_loop_is_copied():
    """init stays live after the loop, so the iter_arg needs its own buffer: x, init, acc."""
    assert account(_loop(True), MIB).peak == 3 * S_BYTES


def test_a_value_used_inside_a_loop_lives_until_the_loop_ends():
    """x's last textual use is inside the body, but every trip reads it: it is live during the
    whole loop, also while the body's temporaries exist (x + acc + t + n at the mulf)."""
    body = (_view_load("x", "a", (16, 64))
            + "    %c1 = arith.constant 1 : index\n    %c4 = arith.constant 4 : index\n"
            f"    %z = tensor.splat %c0f : {S}\n"
            f"    %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %z) -> ({S}) {{\n"
            f"      %t = arith.mulf %x, %x : {S}\n"
            f"      %n = arith.addf %acc, %t : {S}\n"
            f"      scf.yield %n : {S}\n    }}\n" + _store("r", "o", (16, 64)))
    fn = _function(["a", "o"], body.replace("%z = tensor.splat", "%c0f = arith.constant 0.0 : f16\n    %z = tensor.splat"))
    assert account(fn, MIB).peak == 3 * S_BYTES  # x, acc (= z's buffer), t; n takes acc's


def test_a_reshape_keeps_its_operand_buffer_alive():
    body = (_view_load("x", "a", (16, 64))
            + f"    %f = tensor.collapse_shape %x [[0, 1]] : {S} into tensor<1024xf16>\n"
            "    %g = arith.negf %f : tensor<1024xf16>\n"
            f"    %h = tensor.expand_shape %g [[0, 1]] output_shape [16, 64] : tensor<1024xf16> into {S}\n"
            + _store("h", "o", (16, 64)))
    fn = _function(["a", "o"], body)
    # x's buffer is f's too: it dies at the negf, whose result takes it; h aliases g
    assert account(fn, MIB).peak == S_BYTES


def test_machine_rejects_an_unknown_model():
    with pytest.raises(UserError, match="lx_model must be one of allocator, strict"):
        ktir.Machine(lx_model="loose")


def test_run_command_takes_the_lx_model(tmp_path):
    """`run --lx-model`: GOOD keeps d and the splat live while the mulf runs (2 x 16 bytes; the
    result takes the splat's buffer); strict adds the result first (48 bytes)."""
    from test_cli_ktir import GOOD, cli

    program = tmp_path / "good.mlir"
    program.write_text(GOOD)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.ones((2, 4), np.float16), y=np.zeros((2, 4), np.float16))
    base = ["run", str(program), "--inputs", str(inputs), "--scalar", "s=2", "--lx-capacity", "40"]
    r = cli(*base)
    assert r.returncode == 0 and "LX high-water 32 bytes" in r.stdout, (r.stdout, r.stderr)
    r = cli(*base, "--lx-model", "strict")
    assert r.returncode == 2 and "LX scratchpad overflow" in r.stderr and "arith.mulf" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli(*base, "--lx-model", "loose")
    assert r.returncode == 2 and "--lx-model" in r.stderr and "allocator, strict" in r.stderr
