"""What every command shares: the Typer app, the console, one-line errors, the registry and lease."""

from __future__ import annotations

import logging
import os
import sys
import traceback
import warnings
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from typer.core import TyperGroup

from grpo_lab.util.paths import cache_dir
from grpo_lab.util.yamlio import ConfigError

# rich shows grpo-lab's progress; transformers' per-load tqdm bars (also in the workers, which inherit
# the environment) would interleave with it. Set HF_HUB_DISABLE_PROGRESS_BARS=0 to see them.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

class Commands(TyperGroup):
    """Every command's user errors (ConfigError: a matrix, a config, a data row, a workspace) end
    as one line, wherever in the library they are raised; other exceptions are bugs and keep
    their traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            fail(exc)


app = typer.Typer(no_args_is_help=True, cls=Commands)
# Off a terminal (a log file, a pipe, CI) rich would cut every table at 80 columns: print them whole.
console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 400)


def print_reference(table) -> None:
    """A catalog table (tricks, tasks, config keys) at 80 columns off a terminal, unless COLUMNS
    says otherwise: it is read by a person through a pipe or a pager, where a 400-column line is
    unreadable; the run tables keep their whole width for logs."""
    console.print(table, width=None if console.is_terminal or "COLUMNS" in os.environ else 80)


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (config, tracking) as one console line, also above a live progress display."""
    console.print("[yellow]warning:[/] ", end="")
    console.print(str(message), markup=False, highlight=False)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

        console.print(f"grpo-lab {version('grpo-lab')}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="print the installed version and exit")) -> None:
    """grpo-lab: which GRPO training tricks are worth their GPUs."""
    warnings.showwarning = show_warning  # before any command: config and tracking warnings
    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its INFO lines on creating a store are noise here


def fail(exc: Exception) -> None:
    """The error as one line on the screen, its traceback appended to error_log()."""
    log_traceback(exc)
    console.print("[bold red]error:[/] ", end="")
    console.print(str(exc), markup=False, soft_wrap=True)  # one line per message, not wrapped to the terminal
    raise typer.Exit(2)


def error_log() -> Path:
    return cache_dir() / "errors.log"


def log_traceback(exc: Exception) -> None:
    """Where a one-line error came from, for a bug report: the command and the full traceback."""
    if exc.__traceback__ is None:
        return
    try:
        error_log().parent.mkdir(parents=True, exist_ok=True)
        with error_log().open("a") as fh:
            fh.write(f"--- {datetime.now():%Y-%m-%d %H:%M:%S} grpo-lab {' '.join(sys.argv[1:])}\n")
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:  # an unwritable cache must not hide the error itself
        pass


def open_registry(db: str | None, workspace: Path):
    """The registry's session factory; a bad or unreachable URL ends the command with its reason."""
    from grpo_lab.execution import registry as reg

    try:
        return reg.connect(db or reg.default_url(workspace))
    except ConfigError as exc:
        fail(exc)
