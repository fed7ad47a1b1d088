"""Memory spaces in both of the dialect's spellings: the current ``#ktdp.memory_space<global |
ct_local[, ct_id = N]>`` and the earlier ``#ktdp.spyre_memory_space<HBM | LX | L0 |
unspecified[, core = N]>``, in memref types and in view attributes (custom and generic form),
read to the same thing; our emitter writes the current one, and every fixture's program in the
earlier spelling (what the emitter wrote before) gives the same logits bit for bit."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from test_machine import box, load, program, store, tile

from ktir_models import ktir
from ktir_models.ktir.ir.nodes import MemorySpace, MemRefType
from ktir_models.model.emit import emit_program
from ktir_models.model.emit.fixtures import FIXTURE_MODELS, FIXTURE_PASSES, FIXTURES_DIR

SAME = [
    ("#ktdp.memory_space<global>", "#ktdp.spyre_memory_space<HBM>", MemorySpace("hbm")),
    ("#ktdp.memory_space<ct_local>", "#ktdp.spyre_memory_space<LX>", MemorySpace("lx")),
    ("#ktdp.memory_space<ct_local, ct_id = 3>", "#ktdp.spyre_memory_space<LX, core = 3>",
     MemorySpace("lx", 3)),
]


def memref_arg(space: str) -> MemRefType:
    text = (f"module {{\n  func.func @f(%m: memref<64x64xf16, {space}>) {{\n    return\n  }}\n"
            "}\n")
    module = ktir.parse_text(text, "m.mlir")
    ktir.verify(module)
    return module.function("f").args[0].type


@pytest.mark.parametrize("current,earlier,space", SAME)
def test_both_spellings_in_a_memref_type_read_the_same(current, earlier, space):
    a, b = memref_arg(current), memref_arg(earlier)
    assert a.memory_space == b.memory_space == space
    assert a == b and str(a) == str(b) == f"memref<64x64xf16, {current}>"


def view_space(space: str, generic: bool) -> MemorySpace:
    if generic:
        op = (f'    %v = "ktdp.construct_memory_view"(%a) <{{coordinate_set = {box((4, 8))}, '
              f'memory_space = {space}, operandSegmentSizes = array<i32: 1, 0, 0>, '
              f'static_sizes = array<i64: 4, 8>, static_strides = array<i64: 8, 1>}}> '
              f": (index) -> memref<4x8xf16>\n")
    else:
        op = (f"    %v = ktdp.construct_memory_view %a, sizes: [4, 8], strides: [8, 1] "
              f"{{coordinate_set = {box((4, 8))}, memory_space = {space}}} : memref<4x8xf16>\n")
    module = ktir.parse_text(
        f"module {{\n  func.func @f(%a: index) {{\n{op}    return\n  }}\n}}\n", "v.mlir")
    ktir.verify(module)
    return module.function("f").body.block.ops[0].attrs["memory_space"]


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("current,earlier,space", SAME)
def test_both_spellings_on_a_view_read_the_same(current, earlier, space, generic):
    assert view_space(current, generic) == view_space(earlier, generic) == space


@pytest.mark.parametrize("space,expect", [
    ("#ktdp.memory_space<ct_local, core = 3>", "expected 'ct_id = N' once"),
    ("#ktdp.spyre_memory_space<LX, ct_id = 3>", "expected 'core = N' once"),
    ("#ktdp.memory_space<global, ct_id = 1>", "cannot name a core"),
    ("#ktdp.memory_space<HBM>", "unknown memory space 'HBM'"),
    ("#ktdp.spyre_memory_space<global>", "unknown memory space 'global'"),
    ("#ktdp.memory_space<ct_local, ct_id = 1, ct_id = 2>", "once"),
    ("#ktdp.memory_spaces<global>", "unknown attribute '#ktdp.memory_spaces'"),
])
def test_a_wrong_memory_space_is_one_located_error(space, expect):
    text = f"module {{\n  func.func @f(%m: memref<4xf16, {space}>) {{\n    return\n  }}\n}}\n"
    with pytest.raises(ktir.KtirError) as info:
        ktir.parse_text(text, "s.mlir")
    errs = [str(d) for d in info.value.diagnostics]
    assert len(errs) == 1 and errs[0].startswith("s.mlir:2:") and expect in errs[0], errs


def test_a_kernel_runs_the_same_in_either_spelling():
    def run(space: str) -> np.ndarray:
        body = (f"    %va = ktdp.construct_memory_view %a, sizes: [4, 8], strides: [8, 1] "
                f"{{coordinate_set = {box((4, 8))}, memory_space = {space}}} "
                f": memref<4x8xf16, {space}>\n"
                + tile("ta", "va", (4, 8), (4, 8), "%c0, %c0") + load("x", "ta", (4, 8))
                + "    %y = arith.addf %x, %x : tensor<4x8xf16>\n" + store("y", "ta", (4, 8)))
        fn = program("%a: index", body)
        m = ktir.Machine()
        buf = m.hbm.allocate_from(np.arange(32, dtype=np.float16).reshape(4, 8), name="a")
        m.compile(fn).run([buf.address])
        return buf.read()
    np.testing.assert_array_equal(run("#ktdp.memory_space<global>"),
                                  run("#ktdp.spyre_memory_space<HBM>"))


# -- our emitter ----------------------------------------------------------------------------------

PASSES = {fx.directory: fx for fx in FIXTURE_PASSES}


def test_emitted_text_is_in_the_current_spelling(tmp_path):
    fx = PASSES["tiny-mha-decode"]
    fresh = emit_program(FIXTURE_MODELS[fx.model], fx.mode, fx.tokens, fx.past, tmp_path / "p",
                         fx.model)
    programs = list(fresh.glob("node*.mlir")) + list(FIXTURES_DIR.glob("*/node*.mlir"))
    assert len(programs) > 20
    for path in programs:
        text = path.read_text()
        assert "spyre_memory_space" not in text, path
        assert "#ktdp.memory_space<global>" in text, path


def fixture_logits(program_dir, model: str) -> np.ndarray:
    """The logits of one pass of fixture ``program_dir`` on its vendored inputs (as ``forward
    --golden vendored`` runs it)."""
    from ktir_models.model.inputs.bindings import bind_pass_inputs, input_tensor_ids, pass_spec
    from ktir_models.model.inputs.bindings import read_vendored_inputs
    from ktir_models.model.emit.generation import prefill_cache_inputs
    from ktir_models.model.manifest import load_manifest
    from ktir_models.model.registry import resolve_model
    from ktir_models.model.runner import Runner
    from ktir_models.model.weights.checkpoint import get_checkpoint

    spec = resolve_model(str(FIXTURES_DIR / "models" / model))
    manifest = load_manifest(program_dir)
    ckpt = get_checkpoint(spec, "hub", seed=0)
    vendored = read_vendored_inputs(manifest, input_tensor_ids(manifest))
    pass_ = pass_spec(manifest, spec.config)
    if pass_.past:
        vendored = {**prefill_cache_inputs(ckpt, manifest, prefix_ids=pass_.prefix_ids),
                    **vendored}
    runner = Runner(manifest, show_progress=False)
    runner.load()
    runner.marshal(ckpt)
    return runner.run(bind_pass_inputs(manifest, spec.config, ckpt, pass_, vendored)).result


@pytest.mark.parametrize("directory", sorted(PASSES))
def test_every_fixture_gives_the_same_logits_as_in_the_earlier_spelling(tmp_path, directory):
    """The programs the emitter wrote before spelled HBM ``#ktdp.spyre_memory_space<HBM>``;
    that is the only difference, so the vendored program rewritten back runs to the same
    bits."""
    vendored = FIXTURES_DIR / directory
    earlier = tmp_path / directory
    shutil.copytree(vendored, earlier)
    for path in earlier.glob("node*.mlir"):
        text = path.read_text()
        path.write_text(text.replace("#ktdp.memory_space<global>", "#ktdp.spyre_memory_space<HBM>"))
        assert "spyre_memory_space<HBM>" in path.read_text()
    model = PASSES[directory].model
    now, before = fixture_logits(vendored, model), fixture_logits(earlier, model)
    assert now.dtype == np.float16 and np.isfinite(now).all()
    np.testing.assert_array_equal(now.view(np.uint16), before.view(np.uint16))
