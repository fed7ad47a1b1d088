"""Checkpoints from the HuggingFace hub, through the ``huggingface_hub`` client.

Cache first: a snapshot already in the hub cache is used without touching the network. Only when it
is missing, and the environment does not say ``HF_HUB_OFFLINE=1``, do we ask the hub. Environment
variables are read at call time (``HF_HUB_OFFLINE``, ``HF_HUB_CACHE``, ``HF_HOME``), not at import
time, so a process may change them after importing us.

Every failure becomes one :class:`UserError` that says what to do instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from ktir_models.errors import UserError

# The files a llama checkpoint needs; tokenizer files and other formats are not downloaded.
CHECKPOINT_PATTERNS = ["config.json", "*.safetensors", "model.safetensors.index.json"]
#: The files of a tokenizer (what ``tokenizer.load_tokenizer`` asks the hub cache for).
TOKENIZER_PATTERNS = ["tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                      "special_tokens_map.json", "generation_config.json", "chat_template.jinja"]
_TRUE = {"1", "on", "yes", "true"}


def hub_cache_dir(cache_dir: Path | None = None) -> Path:
    """The hub cache in use: ``cache_dir``, else ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else the
    client's default (``~/.cache/huggingface/hub``)."""
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def is_offline() -> bool:
    """``HF_HUB_OFFLINE`` as set now; when unset, the client's setting from its import time."""
    if "HF_HUB_OFFLINE" in os.environ:
        return os.environ["HF_HUB_OFFLINE"].strip().lower() in _TRUE
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _endpoint_unreachable() -> str | None:
    """A reason when the hub's host name does not even resolve (no network, no DNS), else None.

    The client retries a failing request for ~20 s before giving up; a failed name lookup lets us
    say so at once.
    """
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = os.environ.get("HF_ENDPOINT") or constants.ENDPOINT
    host = urlparse(url).hostname
    if not host:
        return f"HF_ENDPOINT {url!r} has no host name"
    try:
        socket.getaddrinfo(host, None)
    except OSError as exc:
        return f"cannot resolve {host}: {exc.strerror or exc}"
    return None


def _advice(repo_id: str, revision: str | None, cache: Path, reason: str) -> UserError:
    where = f"{repo_id}@{revision or 'main'}"
    mode = "offline (HF_HUB_OFFLINE=1)" if is_offline() else "the hub could not be reached"
    return UserError(
        f"cannot load {where} from the HuggingFace hub: it is not in the cache {cache} and {mode} "
        f"[{reason}]. Use '--weights synthetic' for a seeded checkpoint of the same architecture, "
        f"or '--weights DIR' for a local directory with config.json + *.safetensors; or place the "
        f"model in the hub cache (HF_HOME / HF_HUB_CACHE) and set HF_HUB_OFFLINE=1."
    )


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0].split(". ")[0] if text else ""
    if len(first) > 160:
        first = first[:157] + "..."
    return f"{type(exc).__name__}: {first}"


def snapshot_dir(repo_id: str, revision: str | None, cache_dir: Path | None = None) -> Path:
    """The local snapshot directory of ``repo_id`` at ``revision`` (branch, tag or commit),
    holding config.json and the safetensors files; downloaded only if not cached and online."""
    from huggingface_hub import snapshot_download

    return _cache_first(
        snapshot_download, repo_id, revision, cache_dir, allow_patterns=CHECKPOINT_PATTERNS
    )


def tokenizer_dir(repo_id: str, revision: str | None, cache_dir: Path | None = None) -> Path | None:
    """The snapshot directory holding ``repo_id``'s tokenizer files (cache first, then the hub when
    online), or ``None`` when they cannot be had: a checkpoint without its tokenizer still runs on
    token ids, so this is not an error here."""
    from huggingface_hub import snapshot_download

    try:
        return _cache_first(snapshot_download, repo_id, revision, cache_dir, allow_patterns=TOKENIZER_PATTERNS)
    except UserError:
        return None


def fetch_config(repo_id: str, revision: str | None, cache_dir: Path | None = None) -> Path:
    """The cached (or, when online, downloaded) ``config.json`` of a hub repo."""
    from huggingface_hub import hf_hub_download

    return _cache_first(hf_hub_download, repo_id, revision, cache_dir, filename="config.json")


def _cache_first(fetch, repo_id: str, revision: str | None, cache_dir: Path | None, **extra) -> Path:
    """Call a huggingface_hub ``fetch`` on the cache only, then (online, hub reachable) for real.

    Every failure becomes one UserError saying what to do instead.
    """
    cache = hub_cache_dir(cache_dir)
    kwargs = dict(repo_id=repo_id, revision=revision, cache_dir=str(cache), **extra)
    try:
        return Path(fetch(local_files_only=True, **kwargs))
    except Exception as exc:  # the client raises several unrelated types for "not cached"
        cached_error = exc
    if is_offline():
        raise _advice(repo_id, revision, cache, _reason(cached_error))
    unreachable = _endpoint_unreachable()
    if unreachable:
        raise _advice(repo_id, revision, cache, unreachable)
    try:
        return Path(fetch(**kwargs))
    except Exception as exc:  # network, auth, missing repo/revision: all user-facing
        raise _advice(repo_id, revision, cache, _reason(exc)) from None
