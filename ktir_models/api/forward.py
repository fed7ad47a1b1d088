"""``forward``: run a whole-model KTIR program on the emulator and compare its logits with a
golden (the pass rule of docs/forward.md).

The only file it writes is the ``json`` report (atomically); without ``program`` our emitter's
program comes from its cache (``$KTIR_MODELS_CACHE/programs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError
from .option_checks import check_pass_options, check_seed
from .reports import ForwardReport, write_report_json
from .runtime import build_backend, check_lx_model


def forward(model: str, *, program: Path | str | None = None, mode: str | None = None,
            tokens: int | None = None, past: int = 0, weights: str = "hub", golden: str = "auto",
            repeat: int = 1, json: Path | str | None = None, force: bool = False, seed: int = 0,
            quiet: bool = False, latency: bool = False, diagnose: bool = False,
            backend: str = "numpy", device: str = "auto", lx_model: str = "allocator",
            prompt: str | None = None, text: Path | str | None = None,
            last_token: bool = False) -> ForwardReport:
    """Run ``model``'s forward ``program`` (a directory with manifest.json and node*.mlir; default:
    our emitter's) and judge its logits against ``golden`` (``auto`` = the program's vendored
    golden.f16.gz if present, else ``live`` transformers; ``none``; or a golden file).

    ``weights``: ``hub``, ``synthetic`` (seeded by ``seed``) or a local checkpoint.
    ``prompt`` / ``text`` (a UTF-8 file): real text as the pass's tokens, with text metrics.
    ``latency``: add the roofline of every node; ``diagnose``: on a failed forward, name the
    first node out of its f16 band. ``json``: also write ``report.to_dict()`` there (``force``
    replaces a file that is not JSON). ``last_token``: the lm_head and the check for the last row
    only (bit for bit the all-rows run's last row; docs/performance.md). Bad input raises a
    UserError before any heavy work."""
    from ..model.forward import named_inputs, run_forward
    from ..model.registry import resolve_model
    from ..model.checks.report import check_json_target

    program = Path(program) if program is not None else None
    json_path = Path(json) if json is not None else None
    if mode is not None and mode not in ("decode", "prefill"):
        raise UserError(f"--mode {mode}: expected decode or prefill")
    if tokens is not None and tokens < 1:
        raise UserError(f"--tokens {tokens}: expected a positive integer")
    if past < 0:
        raise UserError(f"--past {past}: expected a non-negative integer")
    if repeat < 1:
        raise UserError(f"--repeat {repeat}: expected a positive integer")
    check_seed(seed)
    check_lx_model(lx_model)
    if last_token and (prompt is not None or text is not None):
        raise UserError("--last-token: text metrics read every row's logits; drop --last-token "
                        "with --prompt / --text")
    if json_path is not None:
        check_json_target(json_path, force=force, inputs=named_inputs(program, golden, weights))
    array_backend = build_backend(backend, device)  # an unavailable device fails here, first

    text_input = _text_input(model, weights, seed, prompt, None if text is None else Path(text))
    if program is None:
        if text_input is not None and tokens is None:  # our program runs the whole text
            tokens, mode = _text_pass_shape(text_input, mode, past)
        elif text_input is not None and mode is None:
            mode = "decode" if tokens == 1 else "prefill"
        program = _emit(model, mode, tokens, past)
    elif past:
        raise UserError("--past: only for our emitted programs (a --program carries its own past)")
    run = run_forward(resolve_model(model), program, mode=mode, tokens=tokens, weights=weights,
                      golden=golden, repeat=repeat, seed=seed, quiet=quiet, json_path=json_path,
                      backend=array_backend, lx_model=lx_model, text_input=text_input,
                      last_token=last_token)
    report = ForwardReport(run.report)
    if latency:
        from .latency import program_latency

        report.latency = program_latency(program, parsed=run.parsed)
    if diagnose and not report.passed:
        from .diagnose import diagnose_program

        try:
            report.diagnosis = diagnose_program(
                model, program, weights, seed, backend=array_backend, parsed=run.parsed,
                pass_=run.pass_ if text_input is not None else None)
        except UserError as exc:  # e.g. a program whose KV prefix the host cannot bind alone
            report.diagnosis_error = str(exc)
    if json_path is not None:
        write_report_json(json_path, report.to_dict())
    return report


def _emit(model: str, mode: str | None, tokens: int | None, past: int = 0) -> Path:
    """Our own program for ``model``, from the emitter's program cache (emitted on a miss)."""
    from ..model.registry import resolve_model

    spec = resolve_model(model)
    try:
        from ..model.emit import cached_program
    except ImportError:
        raise UserError(
            "forward: our KTIR emitter is not available in this build; pass --program DIR "
            "(a fixture directory with manifest.json and node*.mlir)"
        ) from None
    # checked before anything is emitted
    check_pass_options(spec.config, spec.name, mode or "decode", tokens, past)
    return cached_program(spec.config, mode or "decode", tokens, past, name=spec.name)


def _text_input(model: str, weights: str, seed: int, prompt: str | None,
                text_file: Path | None) -> Any:
    """The tokenised ``prompt`` / ``text`` (None without either); a UserError when the checkpoint
    has no tokenizer."""
    from ..model.inputs.text import encode_text, read_text

    given = read_text(prompt, text_file)
    if given is None:
        return None
    from ..model.registry import resolve_model
    from ..model.weights.checkpoint import get_checkpoint

    spec = resolve_model(model)
    return encode_text(get_checkpoint(spec, weights, seed=seed), spec, *given)


def _text_pass_shape(text_input: Any, mode: str | None, past: int) -> tuple[int, str]:
    """(m, mode) of our program for a text: every token after the ``past`` prefix in one pass."""
    m = len(text_input.ids) - past
    if m < 1:
        raise UserError(f"{text_input.where}: encodes to {len(text_input.ids)} tokens, none left "
                        f"after --past {past}")
    if mode == "decode" and m != 1:
        raise UserError(f"{text_input.where}: encodes to {len(text_input.ids)} tokens; decode runs "
                        f"one (use --past {len(text_input.ids) - 1} to decode its last token after "
                        "the rest)")
    return m, mode or ("decode" if m == 1 else "prefill")
