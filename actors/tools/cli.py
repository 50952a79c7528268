"""The command line: ``otpy`` (or ``python -m actors``) demo, node, chaos, status, observe, bench, keygen.

This module is the entry point (`main`); the parser is `cli_parsers` (one
``add_<name>`` per subcommand, in `COMMANDS`), the argument types
`cli_types`, what each subcommand runs `cli_run` and `cli_status`.

One error path: a user error (bad option, bad config file or value, a
directory that is not a running node's) ends as one line on stderr naming
what and where, and exit status 2; the traceback only with ``-v``.
"""

from __future__ import annotations

import argparse
import configparser
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from actors.app.logformat import configure
from actors.attach import NotANode
from actors.config import ConfigError
from actors.interrupt import exit_status, stop_once

from .cli_parsers import COMMANDS, EXIT_USAGE, build_parser
from .cli_run import CliError
from .cli_status import status_text

__all__ = ["COMMANDS", "CliError", "build_parser", "main", "status_text"]

EXIT_BROKEN_PIPE = 141


#: Commands that log at INFO by default: a daemon's operator reads what happens to it in its log.
LOUD = frozenset({"node"})


def _setup_logging(args: argparse.Namespace) -> None:
    """stderr at ``--log-level`` (else INFO for a daemon or with ``-v``, else CRITICAL: the
    other commands print their own reports), in ``--log-format`` (plain by default)."""
    loud = args.verbose or getattr(args, "command", None) in LOUD
    level = args.log_level.upper() if args.log_level else ("INFO" if loud else "CRITICAL")
    configure(getattr(logging, level), getattr(args, "log_format", None) or "plain")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args)
    where = f"{parser.prog} {args.command}"
    try:
        # Every command: the first Ctrl-C or SIGTERM raises, so the command stops its work, cleans up and
        # reports; those after it cannot cut that short (they are ignored until the process exits).
        with stop_once():
            return int(args.run(args))
    except (CliError, NotANode, ConfigError, configparser.Error, OSError) as exc:
        if isinstance(exc, BrokenPipeError):
            # `otpy demo | head`: the reader is gone; the command has cleaned up on its way out.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_BROKEN_PIPE
        if args.verbose:
            traceback.print_exc()
        print(f"{where}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        print(f"{where}: interrupted", file=sys.stderr)
        return exit_status(exc)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {exc.filename}"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
