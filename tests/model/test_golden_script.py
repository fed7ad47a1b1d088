"""scripts/gen_golden.py: goldens + runtime inputs for a fixture, by the golden conventions."""

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from ktir_models.errors import UserError
from ktir_models.model.checks.golden import live_forward, read_f16_gz
from ktir_models.model.inputs.runtime_inputs import MASKED, embedding_rows, golden_token_ids, rope_tables
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.synthetic import tiny_config, write_synthetic
from ktir_models.model.weights.checkpoint import get_checkpoint

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_golden.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("gen_golden", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_golden = _load_script()


@pytest.fixture(scope="module")
def synthetic_cache(tmp_path_factory):
    """One synthetic-weights cache for the module (the SmolLM2 checkpoint is generated once)."""
    root = tmp_path_factory.mktemp("gen_golden")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KTIR_MODELS_CACHE", str(root / "cache"))
        yield root


def test_scratchy_smollm2_decode_fixture(corpus_dir, synthetic_cache):
    fixture = corpus_dir / "scratchy" / "smollm2-135m"
    out = synthetic_cache / "fx"
    assert gen_golden.main([str(fixture), "smollm2-135m", "--weights", "synthetic", "--out", str(out)]) == 0
    manifest = json.loads((fixture / "manifest.json").read_text())
    shapes = {t["id"]: (t["rows"], t["cols"]) for t in manifest["tensors"]}
    ckpt = get_checkpoint(resolve_model("smollm2-135m"), "synthetic")
    ids = golden_token_ids(1, 49152)
    assert ids.tolist() == [1001]

    golden = read_f16_gz(out / "golden.f16.gz", (1, 49152))
    np.testing.assert_array_equal(golden, live_forward(ckpt, ids).logits.astype(np.float16))
    np.testing.assert_array_equal(read_f16_gz(out / "t0.f16.gz", shapes[0]), embedding_rows(ckpt, ids))
    cos, sin = rope_tables(ckpt.config, [0])
    np.testing.assert_array_equal(read_f16_gz(out / "t5.f16.gz", (1, 64)), cos)
    np.testing.assert_array_equal(read_f16_gz(out / "t6.f16.gz", (1, 64)), sin)
    for src in manifest["sources"]:
        if src["role"] in ("prefix_k", "prefix_v"):
            assert not read_f16_gz(out / f"t{src['id']}.f16.gz", shapes[src["id"]]).any()
    mask = read_f16_gz(out / f"t{manifest['attn_mask']}.f16.gz", shapes[manifest["attn_mask"]])
    assert (mask == MASKED).all()
    # a complete fixture: the program is linked, not copied
    assert (out / "manifest.json").is_symlink() and (out / "node451.mlir").is_symlink()
    provenance = json.loads((out / "golden.json").read_text())
    assert provenance["origin"] == "synthetic:0" and provenance["token_ids"] == [1001]

    with pytest.raises(UserError, match="exists"):  # no overwrite without --force
        gen_golden.generate(fixture, "smollm2-135m", "synthetic", out=out)
    before = (out / "golden.f16.gz").read_bytes()
    gen_golden.generate(fixture, "smollm2-135m", "synthetic", out=out, force=True)
    assert (out / "golden.f16.gz").read_bytes() == before


def test_scratchy_smollm2_prefill_fixture(corpus_dir, synthetic_cache):
    fixture = corpus_dir / "scratchy" / "smollm2-135m-prefill"
    out = synthetic_cache / "prefill"
    gen_golden.generate(fixture, "smollm2-135m", "synthetic", out=out)
    ckpt = get_checkpoint(resolve_model("smollm2-135m"), "synthetic")
    ids = golden_token_ids(32, 49152)
    golden = read_f16_gz(out / "golden.f16.gz", (32, 49152))
    np.testing.assert_array_equal(golden, live_forward(ckpt, ids).logits.astype(np.float16))
    np.testing.assert_array_equal(read_f16_gz(out / "t0.f16.gz", (32, 576)), embedding_rows(ckpt, ids))
    cos, _ = rope_tables(ckpt.config, np.arange(32))
    np.testing.assert_array_equal(read_f16_gz(out / "t5.f16.gz", (32, 64)), cos)
    assert (read_f16_gz(out / "t787.f16.gz", (1, 64)) == MASKED).all()
    assert json.loads((out / "golden.json").read_text())["positions"] == list(range(32))


def test_refuses_to_write_into_the_corpus(corpus_dir, capsys):
    fixture = corpus_dir / "scratchy" / "smollm2-135m"
    assert gen_golden.main([str(fixture), "smollm2-135m", "--weights", "synthetic"]) == 2
    assert "refusing to write into the shared corpus" in capsys.readouterr().err


def _tiny_fixture(directory: Path, cfg, m: int, past: int, cache: int) -> None:
    """A minimal manifest with the source roles gen_golden fills (no program needed for it)."""
    kv = cfg.num_key_value_heads * cfg.head_dim
    tensors = [{"id": 0, "rows": m, "cols": cfg.hidden_size, "is_source": True},
               {"id": 1, "rows": m, "cols": cfg.head_dim, "is_source": True},
               {"id": 2, "rows": m, "cols": cfg.head_dim, "is_source": True}]
    sources = [{"id": 0, "role": "embed"}, {"id": 1, "role": "cos"}, {"id": 2, "role": "sin"}]
    for layer in range(cfg.num_hidden_layers):
        for role in ("prefix_k", "prefix_v"):
            tid = len(tensors)
            tensors.append({"id": tid, "rows": cache, "cols": kv, "is_source": True})
            sources.append({"id": tid, "role": role, "layer": layer})
    tensors += [{"id": len(tensors), "rows": m, "cols": cfg.vocab_size, "is_source": False},
                {"id": len(tensors) + 1, "rows": m, "cols": cache, "is_source": False}]
    doc = {"tensors": tensors, "sources": sources, "nodes": [], "result": len(tensors) - 2,
           "attn_mask": len(tensors) - 1, "past": past, "positions": list(range(past, past + m))}
    directory.mkdir()
    (directory / "manifest.json").write_text(json.dumps(doc))


def test_decode_after_prefill_fills_the_prefix_cache(tmp_path):
    cfg = tiny_config()
    write_synthetic(tmp_path / "ckpt", cfg, seed=2)
    _tiny_fixture(tmp_path / "fx", cfg, m=2, past=5, cache=8)
    gen_golden.generate(tmp_path / "fx", str(tmp_path / "ckpt"))
    ckpt = get_checkpoint(resolve_model(str(tmp_path / "ckpt")), "hub")
    all_ids = golden_token_ids(7, cfg.vocab_size)
    full = live_forward(ckpt, all_ids)  # no cache: an independent path to the same values
    golden = read_f16_gz(tmp_path / "fx" / "golden.f16.gz", (2, cfg.vocab_size)).astype(np.float32)
    np.testing.assert_allclose(golden, full.logits[5:], atol=2e-2)
    k1 = read_f16_gz(tmp_path / "fx" / "t5.f16.gz", (8, 32))  # layer 1 prefix_k
    np.testing.assert_allclose(k1[:5].astype(np.float32), full.keys[1][:5], atol=2e-3)
    assert not k1[5:].any()
    np.testing.assert_array_equal(read_f16_gz(tmp_path / "fx" / "t1.f16.gz", (2, 16)), rope_tables(cfg, [5, 6])[0])
    mask = read_f16_gz(tmp_path / "fx" / "t8.f16.gz", (2, 8))
    assert (mask[:, :5] == 0).all() and (mask[:, 5:] == MASKED).all()


def test_wrong_result_shape_is_a_user_error(tmp_path):
    cfg = tiny_config()
    write_synthetic(tmp_path / "ckpt", cfg)
    _tiny_fixture(tmp_path / "fx", cfg, m=1, past=0, cache=4)
    doc = json.loads((tmp_path / "fx" / "manifest.json").read_text())
    doc["tensors"][doc["result"]]["cols"] = 100
    (tmp_path / "fx" / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"result tensor .* expected logits \[m=1, vocab=512\]"):
        gen_golden.generate(tmp_path / "fx", str(tmp_path / "ckpt"))
    assert not (tmp_path / "fx" / "golden.f16.gz").exists()
