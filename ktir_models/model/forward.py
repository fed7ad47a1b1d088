"""One whole-model forward: choose the golden, bind the pass (synthetic ids, or a text's), run the
program, compare the logits, judge them, and assemble the report (``report.ForwardReport``).

Order of the work, cheapest failure first: the manifest and its fit to the model, the program's
parse and its agreement with the manifest (``program_checks.py``), the golden's source (a wrong
path or size fails before any weights load), the weights, then the passes and the golden.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError

GOLDEN_KEYWORDS = ("auto", "vendored", "live", "none")
GOLDEN_FILE = "golden.f16.gz"


@dataclass(frozen=True)
class ForwardRun:
    """What one forward leaves: its report, its parsed program (reused by the latency model and
    the diagnosis, so the program is parsed once per run) and the pass it ran
    (``bindings.PassSpec``)."""

    report: Any
    parsed: Any
    pass_: Any


def golden_choice(arg: str, program: Path) -> tuple[str, Path | None]:
    """(``vendored`` | ``live`` | ``none`` | ``file``, the golden file) for ``--golden arg``."""
    vendored = Path(program) / GOLDEN_FILE
    if arg == "auto":
        return ("vendored", vendored) if vendored.is_file() else ("live", None)
    if arg == "vendored":
        if not vendored.is_file():
            raise UserError(f"--golden vendored: {GOLDEN_FILE} not found in {program}")
        return "vendored", vendored
    if arg in ("live", "none"):
        return arg, None
    path = Path(arg)
    if not path.is_file():
        raise UserError(f"--golden {arg}: not vendored, live, none, or an existing golden file")
    return "file", path


def named_inputs(program: Path | None, golden: str, weights: str) -> list[Path]:
    """The files the arguments name before anything is loaded (the program's, a golden file, a
    weights file or directory's): a report path naming one is refused as an input. The full list
    follows once the checkpoint is resolved (:func:`refuse_input_as_output`)."""
    paths = [] if golden in GOLDEN_KEYWORDS or not Path(golden).is_file() else [Path(golden)]
    for arg in (program, None if weights in ("hub", "synthetic") else Path(weights)):
        if arg is not None and Path(arg).is_dir():
            paths += [p for p in Path(arg).iterdir() if p.is_file()]
        elif arg is not None and Path(arg).is_file():
            paths.append(Path(arg))
    return paths


def refuse_input_as_output(json_path: Path, manifest: Any, golden_path: Path | None,
                           ckpt: Any) -> None:
    """``--json`` may only name a file this run does not read (never a program, golden or
    weight)."""
    target = json_path.resolve()
    inputs = [manifest.directory / "manifest.json",
              *(manifest.directory / n.mlir for n in manifest.nodes)]
    inputs += list(manifest.directory.glob("*.f16.gz"))
    if golden_path is not None:
        inputs.append(golden_path)
    directory = getattr(ckpt, "directory", None)
    own = getattr(ckpt, "input_files", None)  # a GGUF checkpoint: its file, not its whole folder
    if own is not None:
        inputs += own()
    elif directory is not None:
        inputs += [p for p in Path(directory).iterdir() if p.is_file()]
    for path in inputs:
        if path.resolve() == target:
            raise UserError(f"--json {json_path}: refusing to overwrite an input of this run "
                            f"({path})")


def run_forward(spec: Any, program: Path, *, mode: str | None, tokens: int | None, weights: str,
                golden: str, repeat: int, seed: int, quiet: bool, json_path: Path | None = None,
                backend: Any = None, lx_model: str = "allocator",
                text_input: Any = None, last_token: bool = False) -> ForwardRun:
    """Run ``program`` (a fixture directory) for model ``spec`` (``registry.ModelSpec``) and judge
    its logits against the golden ``golden`` (``auto``, ``vendored``, ``live``, ``none`` or a
    file). ``mode``/``tokens``: when given, must match the program. ``text_input`` (a tokenised
    text, ``text_input.TextInput``): the pass reads its ids and the report adds teacher-forced
    text metrics. The emulator computes on ``backend`` (default numpy). ``last_token``: the pass
    returns, and the check judges, the last row only (``Runner.run``)."""
    from .checks import golden as golden_mod
    from .inputs.bindings import bind_pass_inputs, input_tensor_ids, pass_spec, read_vendored_inputs
    from .emitted import is_emitted
    from .manifest import load_manifest, validate
    from .program_checks import parse_and_check
    from .checks.report import REL_TOLERANCE, ForwardReport, judge
    from .runner import Runner
    from .weights.checkpoint import get_checkpoint

    cfg = spec.config
    manifest = load_manifest(program)
    m = manifest.tokens
    if mode is not None and mode != manifest.mode:
        raise UserError(f"--mode {mode}: the program in {program} is a {manifest.mode} program "
                        f"(m={m})")
    if tokens is not None and tokens != m:
        raise UserError(f"--tokens {tokens}: the program in {program} runs m={m} tokens per pass")
    validate(manifest, cfg)
    parsed = parse_and_check(manifest)

    # Resolve the golden's source first: a wrong path or size fails before any heavy work.
    if text_input is not None and golden == "auto":
        golden = "live"  # a vendored golden (and its inputs) belongs to the fixture's own token ids
    choice, golden_path = golden_choice(golden, program)
    if text_input is not None and choice in ("vendored", "file"):
        raise UserError(f"--golden {golden}: a stored golden holds the logits of other token ids "
                        f"than {text_input.where}'s; use --golden live (or none) with text")
    reference = None
    if golden_path is not None:
        reference = golden_mod.read_f16_gz(golden_path, (m, cfg.vocab_size))
    vendored = {}
    if choice == "vendored":
        vendored = read_vendored_inputs(manifest, input_tensor_ids(manifest))

    start = time.perf_counter()
    ckpt = get_checkpoint(spec, weights, seed=seed)
    weights_seconds = time.perf_counter() - start
    if json_path is not None:
        refuse_input_as_output(json_path, manifest, golden_path, ckpt)
    pass_ = pass_spec(manifest, cfg)
    if text_input is not None:
        ids, prefix = text_input.pass_ids(pass_.past, m, str(program))
        pass_ = replace(pass_, token_ids=ids, prefix_ids=prefix)
    if pass_.past and is_emitted(manifest):
        # Our programs continue a real KV cache: our own prefill program writes it (emit docs).
        from .emit.generation import prefill_cache_inputs

        prefix = prefill_cache_inputs(ckpt, manifest, backend=backend, prefix_ids=pass_.prefix_ids)
        vendored = {**prefix, **vendored}

    runner = Runner(manifest, show_progress=not quiet, backend=backend, lx_model=lx_model)
    runner.load(parsed)
    runner.marshal(ckpt)
    inputs = bind_pass_inputs(manifest, cfg, ckpt, pass_, vendored)
    result = None
    for _ in range(repeat):
        result = runner.run(inputs, last_token=last_token)
    assert result is not None
    rows = None
    if last_token:
        rows = runner.last_row_head().reason or "the lm_head computed the last row alone"

    golden_seconds = 0.0
    if choice == "live":
        start = time.perf_counter()
        if quiet or not sys.stderr.isatty():
            quiet_transformers()
        reference = golden_mod.live_logits(ckpt, pass_.token_ids, past=pass_.past,
                                           prefix_ids=pass_.prefix_ids)
        golden_seconds = time.perf_counter() - start

    metrics = None
    verdict_passed, reasons = True, []
    near_ties, band, text_doc = [], 0.0, None
    if reference is not None:
        logits = result.result.astype(np.float32)
        met = golden_mod.compare(logits, np.asarray(reference), last_token=last_token)
        verdict = judge(met)
        verdict_passed, reasons = verdict.passed, list(verdict.reasons)
        near_ties, band = [asdict(t) for t in verdict.near_ties], verdict.band
        if text_input is not None:
            from .checks.text_metrics import next_token_targets, text_metrics

            targets = next_token_targets(text_input.ids, pass_.past, m)
            text_doc = {"source": text_input.where, "tokenizer": text_input.tokenizer,
                        "text_tokens": len(text_input.ids),
                        "pass_ids": [int(i) for i in pass_.token_ids],
                        **text_metrics(logits, np.asarray(reference), targets).to_dict()}
        if result.nonfinite is not None:
            nf = result.nonfinite
            verdict_passed = False
            reasons.append(f"node {nf.node} (@{nf.fn}) produced {nf.count} NaN/Inf in tensor "
                           f"{nf.tensor}")
        metrics = metrics_dict(met)

    t = runner.timings
    report = ForwardReport(
        model=spec.name,
        program=str(program),
        mode=manifest.mode,
        tokens=m,
        weights=getattr(ckpt, "origin", weights),
        golden=_golden_label(choice, golden_path, ckpt),
        nodes=len(manifest.nodes),
        repeat=repeat,
        passed=verdict_passed,
        reasons=reasons,
        tolerance=REL_TOLERANCE,
        metrics=metrics,
        seconds={
            "parse": t.parse,
            "compile": t.compile,
            "marshal": t.marshal,
            "execute": t.execute_median,
            "golden": golden_seconds,
            "weights": weights_seconds,
        },
        slowest_nodes=[
            {"node": i, "fn": fn, "seconds": s} for i, fn, s in runner.slowest_nodes(5)
        ],
        node_seconds=runner.node_seconds(),
        nonfinite=asdict(result.nonfinite) if result.nonfinite is not None else None,
        hbm_bytes=runner.hbm_bytes,
        backend=runner.machine.backend.name,
        device=runner.machine.backend.device,
        backend_version=runner.machine.backend.describe(),
        matmul=runner.machine.matmul_order(),
        near_tie_band=band,
        near_ties=near_ties,
        text=text_doc,
        last_token=rows,
    )
    return ForwardRun(report, parsed, pass_)


def _golden_label(choice: str, golden_path: Path | None, ckpt: Any) -> str:
    """The report's ``golden``: where the reference logits came from."""
    if choice == "live" and hasattr(ckpt, "golden_source"):
        return f"live ({ckpt.golden_source}, f32)"
    if choice == "live":
        return "live (transformers f32)"
    return "none" if choice == "none" else f"{choice}: {golden_path}"


def metrics_dict(met: Any) -> dict:
    """A ``golden.Metrics`` as the report's JSON ``metrics``."""
    return {
        "top1_agreement": float(met.top1_agreement),
        "top1_rows": [bool(x) for x in met.top1_rows],
        "max_abs": float(met.max_abs),
        "max_abs_rel": float(met.max_abs_rel),
        "cosine": float(met.cosine),
        "top1_margin": [float(x) for x in met.top1_margin],
        "max_closing": float(met.max_closing),
    }


def quiet_transformers() -> None:
    """No "Loading weights" bar from transformers when the run is quiet (or has no tty)."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # the golden itself reports the missing dependency
        pass
