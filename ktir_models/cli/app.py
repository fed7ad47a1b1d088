"""The typer application object; command modules register themselves on it."""

import typer

app = typer.Typer(
    name="ktir-models",
    help="Run and check KTIR programs and whole transformer forwards on an emulated Spyre.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
