"""Hub checkpoints through the real huggingface_hub client, offline, from a hand-built cache.

The cache follows the hub client's layout: ``models--<org>--<name>/{blobs,refs,snapshots}``, with
snapshot files as relative symlinks to content-addressed blobs and ``refs/<branch>`` holding the
commit hash.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ktir_models.errors import UserError
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.synthetic import tiny_config, write_synthetic
from ktir_models.model.weights.checkpoint import get_checkpoint

REPO = "testorg/tiny-llama"
COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def _add_snapshot(cache: Path, repo: str, commit: str, files_dir: Path, branch: str | None) -> None:
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in sorted(files_dir.iterdir()):
        data = path.read_bytes()
        blob = hashlib.sha256(data).hexdigest()
        (repo_dir / "blobs" / blob).write_bytes(data)
        os.symlink(Path("..") / ".." / "blobs" / blob, snapshot / path.name)
    if branch:
        (repo_dir / "refs").mkdir(exist_ok=True)
        (repo_dir / "refs" / branch).write_text(commit)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """A hub cache with REPO at two commits: main -> seed 1 (single file), v2 -> seed 2 (sharded)."""
    cfg = tiny_config()
    write_synthetic(tmp_path / "src_a", cfg, seed=1)
    write_synthetic(tmp_path / "src_b", cfg, seed=2, max_shard_bytes=60_000)
    cache = tmp_path / "home" / "hub"
    _add_snapshot(cache, REPO, COMMIT_A, tmp_path / "src_a", "main")
    _add_snapshot(cache, REPO, COMMIT_B, tmp_path / "src_b", "v2")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def _embed(ckpt):
    return ckpt.read_f16("model.embed_tokens.weight")


def test_repo_id_loads_offline_from_the_cache(hub_cache):
    spec = resolve_model(REPO)  # config.json through the hub client
    assert spec.repo_id == REPO and spec.config == tiny_config()
    ckpt = get_checkpoint(spec, "hub")
    assert ckpt.origin == f"hub:{REPO}@main"
    assert ckpt.directory.name == COMMIT_A
    reference = get_checkpoint(resolve_model(str(hub_cache / "src_a")), "hub")
    np.testing.assert_array_equal(_embed(ckpt), _embed(reference))


@pytest.mark.parametrize("revision", ["v2", COMMIT_B])
def test_revision_by_branch_or_commit_selects_the_sharded_snapshot(hub_cache, revision):
    ckpt = get_checkpoint(resolve_model(f"{REPO}@{revision}"), "hub")
    assert ckpt.directory.name == COMMIT_B
    assert (ckpt.directory / "model.safetensors.index.json").exists()
    reference = get_checkpoint(resolve_model(str(hub_cache / "src_b")), "hub")
    np.testing.assert_array_equal(_embed(ckpt), _embed(reference))
    assert not np.array_equal(_embed(ckpt), _embed(get_checkpoint(resolve_model(REPO), "hub")))


def test_registry_entry_uses_its_repo_and_revision(hub_cache):
    manifests = hub_cache / "manifests"
    manifests.mkdir()
    config = "\n".join(f"{k} = {json.dumps(v)}" for k, v in tiny_config().to_hf_dict().items()
                       if v is not None and not isinstance(v, (list, dict)))
    (manifests / "tiny.toml").write_text(f'name = "tiny"\nrepo_id = "{REPO}"\nrevision = "v2"\n[config]\n{config}\n')
    spec = resolve_model("tiny", manifests_dir=manifests)
    ckpt = get_checkpoint(spec, "hub")
    assert ckpt.origin == f"hub:{REPO}@v2" and ckpt.directory.name == COMMIT_B


def test_nothing_cached_and_offline_says_what_to_do(hub_cache):
    with pytest.raises(UserError) as err:
        resolve_model("otherorg/not-cached")
    msg = str(err.value)
    assert "otherorg/not-cached" in msg and "HF_HUB_OFFLINE=1" in msg and "--weights synthetic" in msg
    spec = resolve_model("smollm2-135m")  # architecture known from the registry, weights not cached
    with pytest.raises(UserError, match=r"HuggingFaceTB/SmolLM2-135M@main.*--weights synthetic"):
        get_checkpoint(spec, "hub")
    with pytest.raises(UserError, match="not-a-branch"):
        get_checkpoint(resolve_model(f"{REPO}@not-a-branch"), "hub")


def test_a_fresh_process_honours_hf_home_and_offline(hub_cache):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(hub_cache / "home"), HF_HUB_OFFLINE="1")
    code = (
        "from ktir_models.model.registry import resolve_model\n"
        "from ktir_models.model.weights.checkpoint import get_checkpoint\n"
        f"c = get_checkpoint(resolve_model('{REPO}@v2'), 'hub')\n"
        "print(c.origin, c.directory.name, len(c.tensor_names()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [f"hub:{REPO}@v2", COMMIT_B, "20"]


def test_online_but_unresolvable_endpoint_fails_at_once(hub_cache, monkeypatch):
    import socket

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # .invalid never resolves (RFC 2606)
    lookups = []
    resolve = socket.getaddrinfo

    def counted(host, *args, **kwargs):
        lookups.append(host)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counted)
    with pytest.raises(UserError, match=r"could not be reached \[cannot resolve hub.invalid.*--weights synthetic"):
        get_checkpoint(resolve_model("smollm2-135m"), "hub")
    # at once: a lookup or two, not a retry loop (counted, so no verdict rests on the clock)
    assert 1 <= len(lookups) <= 2 and set(lookups) == {"hub.invalid"}, lookups
    # a cached snapshot is still used without any network
    assert get_checkpoint(resolve_model(REPO), "hub").directory.name == COMMIT_A
