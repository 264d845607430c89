"""`python -m polar_bench <command>`: the command-line interface.

Each command lives in a module of `polar_bench.commands` that defines ``register(subparsers)``;
the parser it adds sets ``func(args) -> int``. A `UserError` anywhere becomes one line on stderr
and exit code 2; other exceptions keep their traceback (they are bugs).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from . import __version__
from .errors import UserError

# Modules of polar_bench.commands, in the order their commands appear in --help.
COMMAND_MODULES = ["evaluate", "suites", "scoring", "leaderboard", "artifacts", "reproduce", "scaffold"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m polar_bench",
        description="Evaluate RL and LLM agents on versioned suites and score them with rliable statistics.")
    parser.add_argument("--version", action="version", version=f"polar_bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"polar_bench.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"polar_bench.commands.{name}":
                continue  # a command group not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"interrupted{': ' + str(exc) if str(exc) else ''}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head & co.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
