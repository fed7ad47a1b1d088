"""`ktir-models forward`: run a whole-model KTIR program and compare it with a golden.

Exit codes: 0 pass (or ran with ``--golden none``), 1 mismatch, 2 bad input. The only file this
command writes is the ``--json`` report (atomically); without ``--program`` our emitter's program
comes from its cache (``$KTIR_MODELS_CACHE/programs``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from ..errors import Mismatch, UserError
from .app import app
from .backend_options import backend_option, build_backend, device_option, lx_model_option
from .option_checks import check_pass_options, check_seed

GOLDEN_KEYWORDS = ("auto", "vendored", "live", "none")
GOLDEN_FILE = "golden.f16.gz"


@app.command()
def forward(
    model: str = typer.Argument(..., help="Registry name, local checkpoint dir, or HF repo id."),
    program: Optional[Path] = typer.Option(
        None, "--program", help="Fixture dir (manifest.json + node*.mlir); default: emit our own program."
    ),
    mode: Optional[str] = typer.Option(None, "--mode", help="decode or prefill (must agree with --program)."),
    tokens: Optional[int] = typer.Option(None, "--tokens", help="Tokens per pass m (must agree with --program)."),
    past: int = typer.Option(
        0, "--past", min=0, help="Emitted programs only: tokens already in the KV cache (our prefill writes it first)."
    ),
    weights: str = typer.Option("hub", "--weights", help="hub, synthetic, or a local checkpoint dir."),
    golden: str = typer.Option(
        "auto",
        "--golden",
        help="vendored (golden.f16.gz in the program dir), live (transformers), PATH, none; "
        "auto = vendored if present, else live.",
    ),
    repeat: int = typer.Option(1, "--repeat", min=1, help="Passes to run (timings are medians)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the report as JSON here."),
    force: bool = typer.Option(False, "--force", help="Let --json replace an existing file that is not JSON."),
    seed: int = typer.Option(0, "--seed", help="Seed of --weights synthetic."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    latency: bool = typer.Option(False, "--latency", help="Also print the latency model per node (docs/latency.md)."),
    diagnose: bool = typer.Option(False, "--diagnose", help="On a mismatch, name the first node out of its f16 band."),
    backend: str = backend_option(),
    device: str = device_option(),
    lx_model: str = lx_model_option(),
    prompt: Optional[str] = typer.Option(
        None, "--prompt", help="Real text as the pass's tokens (the checkpoint's tokenizer); adds text metrics."
    ),
    text: Optional[Path] = typer.Option(None, "--text", help="Like --prompt, the text read from this UTF-8 file."),
) -> None:
    """Run MODEL's KTIR forward on the emulator and compare the logits with a golden.

    Pass: top-1 agrees on every row (or the row is a near-tie within 2^-6 max|golden|, reported) and
    max|logits - golden| <= 2^-6 max|golden| (docs/forward.md).
    Exit codes: 0 pass (or ran, with --golden none), 1 mismatch, 2 bad input.
    """
    from ..model.report import check_json_target, write_json

    if mode is not None and mode not in ("decode", "prefill"):
        raise UserError(f"--mode {mode}: expected decode or prefill")
    if tokens is not None and tokens < 1:
        raise UserError(f"--tokens {tokens}: expected a positive integer")
    check_seed(seed)
    if json_path is not None:
        check_json_target(json_path, force=force, inputs=_named_inputs(program, golden, weights))
    array_backend = build_backend(backend, device)  # an unavailable device fails here, first

    text_input = _text_input(model, weights, seed, prompt, text)
    if program is None:
        if text_input is not None and tokens is None:  # our program runs the whole text: m = its length
            tokens, mode = _text_pass_shape(text_input, mode, past)
        elif text_input is not None and mode is None:
            mode = "decode" if tokens == 1 else "prefill"
        program = _emit(model, mode, tokens, past)
    elif past:
        raise UserError("--past: only for our emitted programs (a --program carries its own past)")
    report, parsed, pass_ = _forward(model, program, mode, tokens, weights, golden, repeat, seed, quiet,
                                     json_path, array_backend, lx_model, text_input=text_input)
    print(report.render())
    from .diagnose_commands import forward_extras, with_sections  # --latency / --diagnose

    sections = forward_extras(report, model, program, weights, seed, latency=latency, diagnose=diagnose,
                              backend=array_backend, parsed=parsed,
                              text_pass=pass_ if text_input is not None else None)
    if json_path is not None:
        write_json(json_path, with_sections(report, **sections) if sections else report)
    if report.metrics is not None and not report.passed:
        raise Mismatch("forward: FAIL: " + "; ".join(report.reasons))


def _emit(model: str, mode: str | None, tokens: int | None, past: int = 0) -> Path:
    """Our own program for MODEL, from the emitter's program cache (emitted on a miss)."""
    from ..model.registry import resolve_model

    spec = resolve_model(model)
    try:
        from ..model.emit import cached_program
    except ImportError:
        raise UserError(
            "forward: our KTIR emitter is not available in this build; pass --program DIR "
            "(a fixture directory with manifest.json and node*.mlir)"
        ) from None
    check_pass_options(spec.config, spec.name, mode or "decode", tokens, past)  # before anything is emitted
    return cached_program(spec.config, mode or "decode", tokens, past, name=spec.name)


def _text_input(model, weights, seed, prompt, text_file):
    """The tokenised ``--prompt`` / ``--text`` (None without either); a UserError when the
    checkpoint has no tokenizer."""
    from ..model.text_input import encode_text, read_text

    given = read_text(prompt, text_file)
    if given is None:
        return None
    from ..model.registry import resolve_model
    from ..model.weights import get_checkpoint

    spec = resolve_model(model)
    return encode_text(get_checkpoint(spec, weights, seed=seed), spec, *given)


def _text_pass_shape(text_input, mode, past):
    """(m, mode) of our program for a text: every token after the ``past`` prefix in one pass."""
    m = len(text_input.ids) - past
    if m < 1:
        raise UserError(f"{text_input.where}: encodes to {len(text_input.ids)} tokens, none left after --past {past}")
    if mode == "decode" and m != 1:
        raise UserError(f"{text_input.where}: encodes to {len(text_input.ids)} tokens; decode runs one "
                        f"(use --past {len(text_input.ids) - 1} to decode its last token after the rest)")
    return m, mode or ("decode" if m == 1 else "prefill")


def _forward(model, program, mode, tokens, weights, golden_arg, repeat, seed, quiet, json_path=None,
             array_backend=None, lx_model="allocator", text_input=None):
    """The forward's report, its parsed program (the one parse of the run, reused by
    --latency and --diagnose) and the pass it ran (``bindings.PassSpec``: the token ids, which
    --diagnose reruns); the emulator computes on ``array_backend`` (default numpy).
    With ``text_input`` (a tokenised text) the pass reads its ids instead of the synthetic ones and
    the report adds teacher-forced text metrics."""
    from ..model import golden as golden_mod
    from ..model.bindings import bind_pass_inputs, input_tensor_ids, pass_spec, read_vendored_inputs
    from ..model.emitted import is_emitted
    from ..model.manifest import check_signatures, load_manifest, validate
    from ..model.registry import resolve_model
    from ..model.report import REL_TOLERANCE, ForwardReport, judge
    from ..model.runner import Runner
    from ..model.weights import get_checkpoint

    spec = resolve_model(model)
    cfg = spec.config
    manifest = load_manifest(program)
    m = manifest.tokens
    if mode is not None and mode != manifest.mode:
        raise UserError(f"--mode {mode}: the program in {program} is a {manifest.mode} program (m={m})")
    if tokens is not None and tokens != m:
        raise UserError(f"--tokens {tokens}: the program in {program} runs m={m} tokens per pass")
    validate(manifest, cfg)
    check_signatures(manifest)

    # Resolve the golden's source first: a wrong path or size fails before any heavy work.
    if text_input is not None and golden_arg == "auto":
        golden_arg = "live"  # a vendored golden (and its inputs) belongs to the fixture's own token ids
    choice, golden_path = _golden_choice(golden_arg, program)
    if text_input is not None and choice in ("vendored", "file"):
        raise UserError(f"--golden {golden_arg}: a stored golden holds the logits of other token ids than "
                        f"{text_input.where}'s; use --golden live (or none) with text")
    golden = None
    if golden_path is not None:
        golden = golden_mod.read_f16_gz(golden_path, (m, cfg.vocab_size))
    vendored = read_vendored_inputs(manifest, input_tensor_ids(manifest)) if choice == "vendored" else {}

    start = time.perf_counter()
    ckpt = get_checkpoint(spec, weights, seed=seed)
    weights_seconds = time.perf_counter() - start
    if json_path is not None:
        _refuse_input_as_output(json_path, manifest, golden_path, ckpt)
    pass_ = pass_spec(manifest, cfg)
    if text_input is not None:
        from dataclasses import replace

        ids, prefix = text_input.pass_ids(pass_.past, m, str(program))
        pass_ = replace(pass_, token_ids=ids, prefix_ids=prefix)
    if pass_.past and is_emitted(manifest):
        # Our programs continue a real KV cache: our own prefill program writes it (emit docs).
        from ..model.emit.generation import prefill_cache_inputs

        vendored = {**prefill_cache_inputs(ckpt, manifest, backend=array_backend, prefix_ids=pass_.prefix_ids),
                    **vendored}

    runner = Runner(manifest, show_progress=not quiet, backend=array_backend, lx_model=lx_model)
    parsed = runner.load().parsed
    runner.marshal(ckpt)
    inputs = bind_pass_inputs(manifest, cfg, ckpt, pass_, vendored)
    result = None
    for _ in range(repeat):
        result = runner.run(inputs)
    assert result is not None

    golden_seconds = 0.0
    if choice == "live":
        start = time.perf_counter()
        if quiet or not sys.stderr.isatty():
            quiet_transformers()
        golden = golden_mod.live_logits(ckpt, pass_.token_ids, past=pass_.past, prefix_ids=pass_.prefix_ids)
        golden_seconds = time.perf_counter() - start

    metrics = None
    verdict_passed, reasons = True, []
    near_ties, band, text_doc = [], 0.0, None
    if golden is not None:
        logits = result.result.astype(np.float32)
        met = golden_mod.compare(logits, np.asarray(golden))
        verdict = judge(met)
        verdict_passed, reasons = verdict.passed, list(verdict.reasons)
        near_ties, band = [asdict(t) for t in verdict.near_ties], verdict.band
        if text_input is not None:
            from ..model.text_metrics import next_token_targets, text_metrics

            targets = next_token_targets(text_input.ids, pass_.past, m)
            text_doc = {"source": text_input.where, "tokenizer": text_input.tokenizer,
                        "text_tokens": len(text_input.ids), "pass_ids": [int(i) for i in pass_.token_ids],
                        **text_metrics(logits, np.asarray(golden), targets).to_dict()}
        if result.nonfinite is not None:
            nf = result.nonfinite
            verdict_passed = False
            reasons.append(f"node {nf.node} (@{nf.fn}) produced {nf.count} NaN/Inf in tensor {nf.tensor}")
        metrics = _metrics_dict(met)

    t = runner.timings
    report = ForwardReport(
        model=spec.name,
        program=str(program),
        mode=manifest.mode,
        tokens=m,
        weights=getattr(ckpt, "origin", weights),
        golden={"live": f"live ({ckpt.golden_source}, f32)" if hasattr(ckpt, "golden_source")
                else "live (transformers f32)", "none": "none"}.get(choice, f"{choice}: {golden_path}"),
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
    )
    return report, parsed, pass_


def _named_inputs(program: Path | None, golden: str, weights: str) -> list[Path]:
    """The files the arguments name before anything is loaded (--program's, a --golden file, a
    --weights file or directory's): --json naming one is refused as an input, with or without
    --force. The full list follows once the checkpoint is resolved (_refuse_input_as_output)."""
    paths = [] if golden in GOLDEN_KEYWORDS or not Path(golden).is_file() else [Path(golden)]
    for arg in (program, None if weights in ("hub", "synthetic") else Path(weights)):
        if arg is not None and Path(arg).is_dir():
            paths += [p for p in Path(arg).iterdir() if p.is_file()]
        elif arg is not None and Path(arg).is_file():
            paths.append(Path(arg))
    return paths


def _refuse_input_as_output(json_path: Path, manifest, golden_path: Path | None, ckpt) -> None:
    """--json may only name a file this run does not read (never a program, golden or weight)."""
    target = json_path.resolve()
    inputs = [manifest.directory / "manifest.json", *(manifest.directory / n.mlir for n in manifest.nodes)]
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
            raise UserError(f"--json {json_path}: refusing to overwrite an input of this run ({path})")


def _golden_choice(arg: str, program: Path) -> tuple[str, Path | None]:
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


def _metrics_dict(met) -> dict:
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
    """No "Loading weights" bar from transformers when the user asked for quiet (or no tty)."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # the golden itself reports the missing dependency
        pass
