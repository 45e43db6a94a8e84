"""The `grpo-lab` command line. Thin: parse, call the library, print. One module per group of
commands; importing them registers their commands on `app`, in the order `--help` lists them."""

# isort: off
from grpo_lab.cli.common import app, console
from grpo_lab.cli import train, sweep, analyse  # noqa: F401 (registers the commands)
# isort: on

__all__ = ["app", "console"]
