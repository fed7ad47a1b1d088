"""Weights mapped from their checkpoint files (``Runner(map_weights=...)``, ``Checkpoint.map_f16``):
the same logits bits as weights read into memory, on every pass (plain, batched, replayed tapes,
with the native kernel's copies of weight boxes); the regions read-only and the files untouched;
only F16-stored tensors mapped; and the default policy (an 8B model on 24 GiB maps, a 1B model
does not)."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from fixture_runs import FIXTURES, bits, prepared
from ktir_models import ktir
from ktir_models.errors import UserError
from ktir_models.ktir.backends import seqmm
from ktir_models.model.registry import resolve_model
from ktir_models.model.runner import maps_weights
from ktir_models.model.weights.checkpoint import Checkpoint
from ktir_models.model.weights.synthetic import write_synthetic

native = pytest.mark.skipif(not seqmm.available(),
                            reason="the native matmul kernel cannot be built here")
PROGRAMS = [("tiny-mha-prefill7", "tiny-mha"), ("tiny-gqa4-llama3-decode-p31", "tiny-gqa4-llama3")]


def _digest(directory) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def _passes(program: str, model: str, mapped: bool, copy_to=None):
    return _passes_on(program, model, mapped, copy_to or FIXTURES / "models" / model)


def _passes_on(program: str, model: str, mapped: bool, model_dir):
    """Four passes' logits bits (the plain plan, the batched forms, the recorded and the
    replayed tapes) on a native-kernel machine, the weights mapped or read in."""
    from ktir_models.model.inputs.bindings import (bind_pass_inputs, input_tensor_ids, pass_spec,
                                                   read_vendored_inputs)
    from ktir_models.model.manifest import load_manifest
    from ktir_models.model.runner import Runner
    from ktir_models.model.weights.checkpoint import get_checkpoint

    spec = resolve_model(str(FIXTURES / "models" / model))
    manifest = load_manifest(FIXTURES / program)
    ckpt = get_checkpoint(spec, str(model_dir), seed=0)
    inputs = bind_pass_inputs(manifest, spec.config, ckpt, pass_spec(manifest, spec.config),
                              read_vendored_inputs(manifest, input_tensor_ids(manifest)))
    runner = Runner(manifest, machine=ktir.Machine(native_matmul=True), show_progress=False,
                    map_weights=mapped)
    runner.load()
    runner.marshal(ckpt)
    return runner, [bits(runner.run(inputs).result) for _ in range(4)]


@native
@pytest.mark.parametrize("program, model", PROGRAMS)
def test_mapped_weights_give_the_bits_of_weights_read_in(program, model, tmp_path):
    copy = tmp_path / model
    shutil.copytree(FIXTURES / "models" / model, copy)
    before = _digest(copy)
    mapped, got = _passes(program, model, True, copy_to=copy)
    read_in, want = _passes(program, model, False)
    assert mapped.mapped_bytes == mapped.weight_bytes > 0 and read_in.mapped_bytes == 0
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"pass {k}")
    assert mapped.machine.row_major_used > 0  # the kernel read copies of the mapped boxes
    # every weight region lies over the file, read-only: a write is refused, the file unchanged
    weights = [s.id for s in mapped.manifest.sources if s.role == "weight"]
    for tid in weights:
        region = mapped._buffers[tid].region
        assert not region.writable and not region.data.flags.owndata
    with pytest.raises(UserError, match="read-only"):
        mapped._buffers[weights[0]].write(mapped.tensor(weights[0]))
    del mapped
    assert _digest(copy) == before


def test_only_f16_tensors_are_mapped(tmp_path):
    """bf16 and f32 tensors are converted in memory (map_f16 gives None); f16 ones map to the
    same values as read_f16 gives."""
    spec = resolve_model(str(FIXTURES / "models" / "tiny-mha"))
    for dtype in ("bfloat16", "float32", "float16"):
        out = tmp_path / dtype
        out.mkdir()
        write_synthetic(out, spec.config, seed=1, dtype=dtype)
        ckpt = Checkpoint(out, spec.config, "synthetic:1")
        for name in ckpt.tensor_names():
            mapped = ckpt.map_f16(name)
            if dtype != "float16":
                assert mapped is None
                continue
            assert mapped is not None and not mapped.flags.writeable
            np.testing.assert_array_equal(mapped.view(np.uint16), ckpt.read_f16(name).view(np.uint16))


def test_a_mapped_tensor_out_of_f16_range_is_refused(tmp_path):
    from safetensors.numpy import save_file

    spec = resolve_model(str(FIXTURES / "models" / "tiny-mha"))
    shutil.copytree(FIXTURES / "models" / "tiny-mha", tmp_path / "m")
    path = tmp_path / "m" / "model.safetensors"
    ckpt = Checkpoint(tmp_path / "m", spec.config, "local")
    tensors = {n: ckpt.read_f16(n) for n in ckpt.tensor_names()}
    name = ckpt.tensor_names()[0]
    tensors[name].reshape(-1)[3] = np.inf
    save_file(tensors, str(path))
    with pytest.raises(UserError, match="NaN or outside the float16 range"):
        Checkpoint(tmp_path / "m", spec.config, "local").map_f16(name)


def test_the_default_policy_maps_weights_the_copies_could_not_sit_beside():
    gib = 1 << 30
    machine = ktir.Machine(native_matmul=seqmm.available(), row_major_bytes=4 * gib)
    if machine.native_matmul:
        assert maps_weights(machine, 16 * gib, 24 * gib)       # granite-3.3-8b on this machine
    assert not maps_weights(machine, int(2.5 * gib), 24 * gib)  # llama-3.2-1b: read in
    assert not maps_weights(ktir.Machine(native_matmul=False), 16 * gib, 24 * gib)  # no copies
    assert not maps_weights(ktir.Machine(row_major_bytes=0), 16 * gib, 24 * gib)


def test_prepared_runs_read_weights_in_by_default():
    runner, _, _ = prepared(FIXTURES / "tiny-mha-prefill7", "tiny-mha")
    assert runner.mapped_bytes == 0  # a tiny model on any host: in memory, in huge pages


@native
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_converted_weights_are_spilled_and_mapped_with_the_same_bits(dtype, tmp_path, monkeypatch):
    """A BF16 or F32 checkpoint, mapped: each weight converted to f16, written to an unnamed file
    in the cache folder and mapped from it; the bits of the weights held in memory, and nothing
    left in the folder."""
    from ktir_models.cache_entries import cache_folder
    from ktir_models.model.weights.f16_spill import SPILL_FOLDER

    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    spec = resolve_model(str(FIXTURES / "models" / "tiny-mha"))
    ckpt_dir = tmp_path / dtype
    ckpt_dir.mkdir()
    write_synthetic(ckpt_dir, spec.config, seed=3, dtype=dtype)
    before = _digest(ckpt_dir)
    spilled, got = _passes_on("tiny-mha-prefill7", "tiny-mha", True, ckpt_dir)
    held, want = _passes_on("tiny-mha-prefill7", "tiny-mha", False, ckpt_dir)
    assert spilled.spilled_bytes == spilled.mapped_bytes == spilled.weight_bytes > 0
    assert held.spilled_bytes == held.mapped_bytes == 0
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"pass {k}")
    for s in spilled.manifest.sources:
        if s.role == "weight":
            region = spilled._buffers[s.id].region
            assert not region.writable and not region.data.flags.owndata
    assert list(cache_folder(SPILL_FOLDER).iterdir()) == []  # the file has no name
    assert _digest(ckpt_dir) == before


@native
def test_no_room_on_disk_keeps_converted_weights_in_memory(tmp_path, monkeypatch):
    from ktir_models.model.weights import f16_spill

    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(f16_spill.F16Spill, "room", staticmethod(lambda folder, nbytes: False))
    spec = resolve_model(str(FIXTURES / "models" / "tiny-mha"))
    write_synthetic(tmp_path, spec.config, seed=3, dtype="bfloat16")
    runner, got = _passes_on("tiny-mha-prefill7", "tiny-mha", True, tmp_path)
    assert runner.spilled_bytes == 0 and runner.mapped_bytes == 0
    held, want = _passes_on("tiny-mha-prefill7", "tiny-mha", False, tmp_path)
    np.testing.assert_array_equal(got[-1], want[-1])


def test_a_spill_maps_back_the_bytes_it_was_given(tmp_path):
    from ktir_models.model.weights.f16_spill import F16Spill

    spill = F16Spill(tmp_path)
    arrays = [np.arange(n, dtype=np.float16).reshape(-1, 1) * np.float16(0.5) for n in (1, 3, 5000)]
    arrays.append(np.array([-0.0, np.inf, -np.inf, 65504], np.float16))
    mapped = [spill.put(a) for a in arrays]
    spill.close()
    for a, m in zip(arrays, mapped):
        assert m.shape == a.shape and not m.flags.writeable
        np.testing.assert_array_equal(m.view(np.uint16), a.view(np.uint16))
    assert spill.bytes == sum(a.nbytes for a in arrays) and list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="float16"):
        spill.put(np.zeros(3, np.float32))
