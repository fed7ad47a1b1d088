"""The model registry: ``manifests/<name>.toml`` and the resolution of MODEL arguments.

A MODEL argument is, in this order of precedence:

1. a registry name (``smollm2-135m``): the architecture comes from the TOML, no network needed;
2. a path ending in ``.gguf``: the architecture from its metadata, the weights its tensors;
3. a local directory holding ``config.json`` (and usually ``*.safetensors``);
4. a HuggingFace repo id ``org/name`` or ``org/name@revision``; a repo id that a registry entry
   names resolves to that entry (with the given revision, if any); any other repo's
   ``config.json`` is fetched through the hub client (cache first).

Each registry TOML holds ``name``, ``repo_id``, ``revision`` (optional ``description``) and a
``[config]`` table in ``config.json`` vocabulary (with an optional ``[config.rope_scaling]``), and
optionally ``local_dir``: a checkpoint directory shipped with the project (relative to its root),
and ``config_nulls``: the ``[config]`` fields that are null in the model's config.json (TOML has
no null, and a missing field can mean something else, e.g. mistral's default window).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from ktir_models.errors import UserError
from ktir_models.model.config import ModelConfig

MANIFESTS_DIR = Path(__file__).resolve().parents[2] / "manifests"
# HF repo ids: "org/name", each part letters, digits, '-', '_', '.'; an optional "@revision".
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+(@[\w.\-/]+)?$")


@dataclass(frozen=True)
class ModelSpec:
    """A resolved MODEL argument: where the weights live (hub or local) and the architecture."""

    name: str
    repo_id: str | None
    revision: str | None
    config: ModelConfig
    local_dir: Path | None
    # A GGUF file given as MODEL: its metadata is the architecture, and its tensors the weights.
    weights_file: Path | None = None


def registry_names(manifests_dir: Path | None = None) -> list[str]:
    """Names of the registered models, sorted."""
    directory = manifests_dir or MANIFESTS_DIR
    return sorted(p.stem for p in directory.glob("*.toml"))


def load_registry_entry(name: str, manifests_dir: Path | None = None) -> ModelSpec:
    """Read ``manifests/<name>.toml``; malformed entries are UserErrors naming file and field."""
    path = (manifests_dir or MANIFESTS_DIR) / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read registry entry: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: invalid TOML: {exc}") from None
    for field in ("repo_id", "config"):
        if field not in data:
            raise UserError(f"{path}: field '{field}' is missing")
    if data.get("name", name) != name:
        raise UserError(f"{path}: field 'name' = {data['name']!r} does not match the file name {name!r}")
    config = ModelConfig.from_hf_dict(_config_table(data, path), f"{path} [config]")
    local_dir = None
    if data.get("local_dir") is not None:
        # A checkpoint shipped with the project (path relative to the project root): `--weights
        # hub` then means that directory, so the model runs without any network.
        local_dir = (path.parent.parent / str(data["local_dir"])).resolve()
        if not (local_dir / "config.json").is_file():
            raise UserError(f"{path}: field 'local_dir' = {data['local_dir']!r}: no config.json in {local_dir}")
    return ModelSpec(
        name=name,
        repo_id=str(data["repo_id"]),
        revision=str(data["revision"]) if data.get("revision") is not None else None,
        config=config,
        local_dir=local_dir,
    )


def _config_table(data: dict, path: Path) -> dict:
    """The ``[config]`` table with every ``config_nulls`` field set to null."""
    table = dict(data["config"]) if isinstance(data["config"], dict) else data["config"]
    nulls = data.get("config_nulls", [])
    if not isinstance(nulls, list) or not all(isinstance(n, str) for n in nulls):
        raise UserError(f"{path}: field 'config_nulls' must be a list of field names, got {nulls!r}")
    for name in nulls:
        if name in table:
            raise UserError(f"{path}: field 'config_nulls' lists {name!r}, which [config] also sets")
        table[name] = None
    return table


def resolve_model(arg: str, manifests_dir: Path | None = None, cache_dir: Path | None = None) -> ModelSpec:
    """Turn a MODEL argument into a :class:`ModelSpec` (see the module docstring for the order).

    ``cache_dir`` is the HuggingFace hub cache used for repo ids outside the registry.
    """
    names = registry_names(manifests_dir)
    if arg in names:
        return load_registry_entry(arg, manifests_dir)

    path = Path(arg).expanduser()
    from ktir_models.model.gguf import is_gguf_path, load_gguf

    if is_gguf_path(arg):
        ckpt = load_gguf(path)  # header only; errors name the file and the key or tensor
        return ModelSpec(name=path.stem.lower(), repo_id=None, revision=None, config=ckpt.config,
                         local_dir=None, weights_file=ckpt.path)
    if path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            raise UserError(f"{path}: a model directory must hold config.json (none found)")
        return ModelSpec(
            name=path.resolve().name,
            repo_id=None,
            revision=None,
            config=ModelConfig.from_json(config_path),
            local_dir=path.resolve(),
        )

    if _REPO_ID.match(arg) and not path.exists():
        repo_id, _, revision = arg.partition("@")
        for name in names:
            entry = load_registry_entry(name, manifests_dir)
            if entry.repo_id == repo_id:
                return replace(entry, revision=revision or entry.revision)
        from ktir_models.model.weights import hub  # the hub client is only needed here

        config_path = hub.fetch_config(repo_id, revision or None, cache_dir)
        return ModelSpec(
            name=repo_id.split("/")[-1].lower(),
            repo_id=repo_id,
            revision=revision or None,
            config=ModelConfig.from_json(config_path),
            local_dir=None,
        )

    raise UserError(
        f"MODEL {arg!r} is neither a registered model ({', '.join(names)}), nor a directory "
        f"holding config.json, nor a HuggingFace repo id (org/name[@revision])"
    )
