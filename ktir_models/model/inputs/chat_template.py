"""Chat templates rendered with bounds: a checkpoint's Jinja template wraps ``--chat`` prompts.

A chat template is code from the checkpoint (``chat_template.jinja``, ``tokenizer_config.json``'s
``chat_template`` or a GGUF file's ``tokenizer.chat_template``). It is rendered here, not by
transformers, in a :class:`jinja2.sandbox.ImmutableSandboxedEnvironment` configured as
transformers configures its own (``trim_blocks``, ``lstrip_blocks``, loop controls, the
``tojson`` filter, ``raise_exception``, ``strftime_now``, ``namespace``, the ``generation`` block),
so a valid template gives the same text. Bounds, each a :class:`ChatTemplateError` (exit 2)
naming where the template came from:

* the template is a string of at most :data:`MAX_TEMPLATE_CHARS` characters;
* rendering executes at most :data:`MAX_TEMPLATE_STEPS` lines of the compiled template (counted
  by a trace function, so a verdict never depends on the machine's speed): nested loops cannot
  hang;
* the output is streamed and stops at ``len(prompt) +`` :data:`MAX_TEMPLATE_EXTRA_CHARS`
  characters; ``*``, ``+`` and ``**`` whose result would pass that bound, and any call with an
  integer argument above it, are refused before they allocate;
* any error of the template itself (syntax, ``raise_exception``, an undefined attribute, a type
  error) is reported with its line, never as a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from datetime import datetime
from typing import Any

from ktir_models.errors import UserError

MAX_TEMPLATE_CHARS = 1 << 20
MAX_TEMPLATE_STEPS = 1_000_000
MAX_TEMPLATE_EXTRA_CHARS = 1 << 20
TEMPLATE_NAME = "<chat template>"


class ChatTemplateError(UserError):
    """A chat template that cannot be rendered within its bounds; names the template's origin."""


class _Bound(Exception):
    """A rendering bound was reached (internal; becomes a ChatTemplateError)."""


def _environment(limit: int):
    """A sandboxed environment as transformers builds one, with size checks on ``*``, ``+``,
    ``**`` and call arguments (``limit`` characters or items)."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def sized(value: Any) -> int:
        return len(value) if isinstance(value, (str, list, tuple)) else 0

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "+", "**"})

        def call_binop(self, context, operator, left, right):  # noqa: ANN001  (jinja's signature)
            if operator == "*":
                for seq, count in ((left, right), (right, left)):
                    if sized(seq) and isinstance(count, int) and sized(seq) * count > limit:
                        raise _Bound(
                            f"a repetition of {sized(seq)} x {count} is larger than {limit}"
                        )
            elif operator == "+" and sized(left) + sized(right) > limit:
                raise _Bound(f"a concatenation is larger than {limit}")
            elif (
                operator == "**"
                and isinstance(right, int)
                and abs(right) > 64
                and left not in (0, 1, -1)
            ):
                raise _Bound(f"a power with exponent {right} is out of bounds")
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805  (jinja's signature)
            check_arguments(args, kwargs)
            return super().call(__context, __obj, *args, **kwargs)

    def check_arguments(args, kwargs) -> None:  # noqa: ANN001
        for value in (*args, *kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > limit:
                raise _Bound(f"a call with argument {value} beyond {limit}")

    def checked(filter_function):  # noqa: ANN001
        """A filter that refuses the arguments calls refuse (``center(10**9)``); jinja's marks of
        the filter (``pass_context``, ...) are kept by ``wraps``."""

        @functools.wraps(filter_function)
        def call(*args, **kwargs):
            check_arguments(args, kwargs)
            return filter_function(*args, **kwargs)

        return call

    class Generation(Extension):
        """``{% generation %}...{% endgeneration %}`` (transformers marks assistant text so): the
        body, as is."""

        tags = {"generation"}

        def parse(self, parser):  # noqa: ANN001
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(
                lineno
            )

        def _body(self, caller):  # noqa: ANN001
            return caller()

    def raise_exception(message):  # noqa: ANN001
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):  # noqa
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = Bounded(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.filters.update({name: checked(f) for name, f in env.filters.items()})
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.globals["namespace"] = jinja2.utils.Namespace
    return env


def _bound_joins(compiled: Any, limit: int) -> None:
    """``~`` compiles to a call of ``str_join`` / ``markup_join`` that jinja's sandbox cannot
    intercept; the compiled template's own module names them, so they are replaced there by joins
    that refuse a result over ``limit`` characters (a doubling loop stops at its first step past
    the bound, never at the machine's memory)."""
    names = compiled.root_render_func.__globals__

    def bounded(join):  # noqa: ANN001
        def call(seq):  # noqa: ANN001
            text = join(seq)
            if len(text) > limit:
                raise _Bound(f"a concatenation (~) of {len(text)} characters is larger than "
                             f"{limit}")
            return text

        return call

    for name in ("str_join", "markup_join"):
        if name in names:
            names[name] = bounded(names[name])


def _step_counter(limit: int):
    """A ``sys.settrace`` function that counts the lines the compiled template executes and stops
    it past ``limit`` (Python code of jinja and its filters is not traced: only the template's)."""
    steps = 0

    def local(frame, event, arg):  # noqa: ANN001
        nonlocal steps
        if event == "line":
            steps += 1
            if steps > limit:
                raise _Bound(
                    f"rendering ran past {limit} template steps (a loop that does not end soon)"
                )
        return local

    def tracer(frame, event, arg):  # noqa: ANN001
        return local if frame.f_code.co_filename == TEMPLATE_NAME else None

    return tracer


def template_text(template: Any, where: str) -> str:
    """The template string of a tokenizer's ``chat_template`` (a string, or transformers' dict of
    named templates, of which ``default`` is used); a ChatTemplateError for anything else."""
    if isinstance(template, dict):
        template = template.get("default")
    if not isinstance(template, str):
        raise ChatTemplateError(
            f"{where}: chat_template: expected a string, got {type(template).__name__}"
        )
    if len(template) > MAX_TEMPLATE_CHARS:
        raise ChatTemplateError(
            f"{where}: chat_template of {len(template)} characters "
            f"(at most {MAX_TEMPLATE_CHARS})"
        )
    return template


def render_chat(template: Any, where: str, prompt: str, special_tokens: dict[str, Any]) -> str:
    """The text of one user turn ``prompt`` wrapped by ``template``, ready for the assistant's
    answer (``add_generation_prompt``); ``special_tokens`` are the tokenizer's (``bos_token``, ...).
    Bounds and errors: the module docstring."""
    try:
        import jinja2
    except ImportError:
        raise ChatTemplateError(f"{where}: rendering a chat template needs jinja2 "
                                "(pip install jinja2)") from None

    source = template_text(template, where)
    limit = len(prompt) + MAX_TEMPLATE_EXTRA_CHARS
    env = _environment(limit)
    try:
        code = env.compile(source, filename=TEMPLATE_NAME)
        compiled = env.template_class.from_code(env, code, env.make_globals(None))
        _bound_joins(compiled, limit)
    except jinja2.TemplateSyntaxError as exc:
        raise ChatTemplateError(
            f"{where}: chat template line {exc.lineno}: syntax error: {exc.message}"
        ) from None
    except (jinja2.TemplateError, SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        raise ChatTemplateError(
            f"{where}: chat template does not compile: {str(exc)[:200]}"
        ) from None
    context = {k: v for k, v in special_tokens.items() if isinstance(k, str) and isinstance(v, str)}
    context.update(
        messages=[{"role": "user", "content": prompt}],
        add_generation_prompt=True,
        tools=None,
        documents=None,
    )
    pieces: list[str] = []
    size = 0
    previous = sys.gettrace()
    sys.settrace(_step_counter(MAX_TEMPLATE_STEPS))
    try:
        for piece in compiled.generate(**context):
            size += len(piece)
            if size > limit:
                raise _Bound(f"the rendered text passed {limit} characters")
            pieces.append(piece)
    except _Bound as exc:
        raise ChatTemplateError(f"{where}: chat template refused: {exc}") from None
    except Exception as exc:  # noqa: BLE001  the template's own: raise_exception, undefined, types
        line = _template_line(exc)
        message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ChatTemplateError(f"{where}: chat template{line} failed: {message}") from None
    finally:
        sys.settrace(previous)
    return "".join(pieces)


def _template_line(exc: BaseException) -> str:
    """`` line N`` of the template where ``exc`` was raised, when its traceback passes there."""
    line = ""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TEMPLATE_NAME:
            line = f" line {tb.tb_lineno}"
        tb = tb.tb_next
    return line
