"""Last-token prefill (``Runner.run(..., last_token=True)``): the last row of the all-rows pass,
bit for bit, on the numpy and torch back ends; the one-row lm_head where the matmul order allows
it, all rows otherwise; and the golden check on that row against the golden's last row."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from fixture_runs import FIXTURES, bits, prepared
from ktir_models.ktir.backends import seqmm
from ktir_models.model.checks import golden as golden_mod
from ktir_models.errors import UserError
from ktir_models.model.inputs.bindings import load_weight, pass_spec
from ktir_models.model.registry import resolve_model
from ktir_models.model.checks.report import judge
from torch_test_device import TORCH_DEVICE

PREFILLS = [("tiny-mha-prefill7", "tiny-mha"), ("tiny-gqa4-llama3-prefill32", "tiny-gqa4-llama3")]
native = pytest.mark.skipif(not seqmm.available(),
                            reason="the native matmul kernel cannot be built here")


def last_row_against_all_rows(runner, inputs) -> tuple[np.ndarray, np.ndarray]:
    everything = runner.run(inputs).result
    last = runner.run(inputs, last_token=True).result
    assert everything.shape[0] > 1 and last.shape == (1, everything.shape[1])
    return everything, last


@native
@pytest.mark.parametrize("program, model", PREFILLS)
def test_one_row_lm_head_gives_the_last_row_bit_for_bit(program, model):
    runner, inputs, _ = prepared(FIXTURES / program, model, native_matmul=True)
    everything, last = last_row_against_all_rows(runner, inputs)
    head = runner.last_row_head()
    assert head.plan is not None and head.reason == ""  # the one-row kernel ran, not a slice
    assert head.node == len(runner.manifest.nodes) - 1
    np.testing.assert_array_equal(bits(last), bits(everything[-1:]))
    # a second last-token pass (tapes and batched forms built by then) still gives the same bits
    np.testing.assert_array_equal(bits(runner.run(inputs, last_token=True).result), bits(last))
    # the all-rows pass after it is untouched by the one-row buffers
    np.testing.assert_array_equal(bits(runner.run(inputs).result), bits(everything))


@pytest.mark.parametrize("backend", ["numpy-blas", "torch"])
def test_blas_machines_compute_all_rows_and_return_the_last(backend):
    """OpenBLAS (and torch's BLAS) sum one row in another order than many: no one-row kernel."""
    if backend == "torch":
        pytest.importorskip("torch")
        machine = {"backend": "torch", "device": TORCH_DEVICE}
    else:
        machine = {"native_matmul": False}
    runner, inputs, _ = prepared(FIXTURES / "tiny-mha-prefill7", "tiny-mha", **machine)
    everything, last = last_row_against_all_rows(runner, inputs)
    assert runner.last_row_head().plan is None and "BLAS" in runner.last_row_head().reason
    np.testing.assert_array_equal(bits(last), bits(everything[-1:]))


@native
def test_programs_it_cannot_reproduce_compute_all_rows(tmp_path):
    """An external dump and an lm_head file that is not what the generator writes: all rows."""
    source = FIXTURES / "tiny-mha-prefill7"
    external, edited = tmp_path / "external", tmp_path / "edited"
    shutil.copytree(source, external)
    shutil.copytree(source, edited)
    manifest = json.loads((external / "manifest.json").read_text())
    manifest["format"] = "someone-else/1"
    (external / "manifest.json").write_text(json.dumps(manifest))
    lm_head = edited / f"node{len(manifest['nodes']) - 1}.mlir"
    lm_head.write_text(lm_head.read_text().replace("module {", "module {\n  // edited by hand", 1))
    cases = ((external, "not a program of our emitter"), (edited, "is not the lm_head kernel"))
    for program, reason in cases:
        runner, inputs, _ = prepared(program, "tiny-mha", native_matmul=True)
        everything, last = last_row_against_all_rows(runner, inputs)
        assert runner.last_row_head().plan is None and reason in runner.last_row_head().reason
        np.testing.assert_array_equal(bits(last), bits(everything[-1:]))


@native
def test_the_check_judges_the_last_row_against_the_goldens_last_row():
    pytest.importorskip("transformers")
    runner, inputs, ckpt = prepared(FIXTURES / "tiny-mha-prefill7", "tiny-mha", native_matmul=True)
    spec = pass_spec(runner.manifest, resolve_model(str(FIXTURES / "models" / "tiny-mha")).config)
    golden = golden_mod.live_logits(ckpt, spec.token_ids)
    last = runner.run(inputs, last_token=True).result
    assert golden.shape[0] == 7 and last.shape[0] == 1
    metrics = golden_mod.compare(last, golden, last_token=True)
    assert judge(metrics).passed and len(metrics.top1_rows) == 1
    reference = golden_mod.compare(last, golden[-1:])  # the same figures as the last row alone
    assert (metrics.max_abs, metrics.cosine) == (reference.max_abs, reference.cosine)
    # the row judged is the golden's last: moving the golden's last row's top-1 fails the check
    wrong = golden.copy()
    wrong[-1, np.argmin(wrong[-1])] = 10 * np.abs(golden).max()
    assert not judge(golden_mod.compare(last, wrong, last_token=True)).passed
    wrong_first = golden.copy()
    wrong_first[0, np.argmin(wrong_first[0])] = 10 * np.abs(golden).max()
    assert judge(golden_mod.compare(last, wrong_first, last_token=True)).passed
    with pytest.raises(Exception, match="shape"):  # all rows against the golden's last: refused
        golden_mod.compare(runner.run(inputs).result, golden, last_token=True)


def test_one_row_kernel_keeps_the_m_row_kernels_k_blocks():
    """llama-3.2-1b's lm_head: planned alone, one row would take K blocks of 1024; planned for
    the prefill's 32 rows it takes the 32-row kernel's 2048 (one f16 rounding per K block, so
    the block decides the bits)."""
    from ktir_models.model.emit.tiling import plan_gemm
    from ktir_models.model.last_token import lm_head_text

    cfg = resolve_model("llama-3.2-1b").config
    k, n = cfg.hidden_size, cfg.vocab_size
    assert (plan_gemm(32, k, n).kblock, plan_gemm(1, k, n).kblock) == (2048, 1024)
    planned = lm_head_text(cfg, "head", plan_rows=32, rows=1)
    alone = lm_head_text(cfg, "head", plan_rows=1, rows=1)
    assert "tensor<1x2048xf16>" in planned and "tensor<1x1024xf16>" not in planned
    assert "tensor<1x1024xf16>" in alone
    assert "sizes: [1, 2048]" in planned  # the input view is one row


@native
def test_a_non_finite_logit_of_the_one_row_kernel_is_reported_in_the_last_row():
    """Inf in one lm_head weight row: only the lm_head's output holds it; the last-token pass
    names the lm_head node and the element (m - 1, that column), as the all-rows pass does for
    its rows."""
    runner, inputs, ckpt = prepared(FIXTURES / "tiny-mha-prefill7", "tiny-mha", native_matmul=True)
    lm_head = runner.manifest.nodes[-1]
    weight = next(a.tensor for a in lm_head.args if a.name == "w")
    with pytest.raises(UserError, match="read-only"):  # weights never change once marshalled
        runner._buffers[weight].write(runner.tensor(weight))

    def with_inf(manifest, ckpt_, src):
        values = load_weight(manifest, ckpt_, src)
        if src.id == weight:
            values = values.copy()
            values[5] = np.inf  # logit column 5 of every row
        return values
    runner.marshal(ckpt, weight_loader=with_inf)
    everything = runner.run(inputs).nonfinite
    last = runner.run(inputs, last_token=True)
    assert runner.last_row_head().plan is not None
    assert everything is not None and (everything.node, everything.first_index) == (23, (0, 5))
    assert last.nonfinite is not None and last.nonfinite.node == 23
    assert last.nonfinite.first_index == (6, 5) and last.nonfinite.count == 1
    assert not np.isfinite(last.result[0, 5])
