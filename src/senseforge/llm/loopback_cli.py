"""The parts of ``python -m senseforge.llm.loopback``'s command line (:func:`senseforge.llm.loopback.main`): its
options and help, how a responder and a header are read, and the wait for a signal."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

from senseforge.errors import ConfigError
from senseforge.llm.loopback_formats import REFUSABLE_FORMATS


def load_responder(target: str) -> Callable[[dict[str, Any]], str | dict[str, Any]]:
    """``module:function`` → the function."""

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"responder {target!r}: write module:function")
    try:
        responder: Callable[[dict[str, Any]], str | dict[str, Any]] = getattr(
            importlib.import_module(module_name), attribute
        )
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"responder {target!r}: {exc}") from exc
    return responder


def header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise SystemExit(f"--header takes NAME:VALUE, not {text!r}")
    return name.strip(), value.strip()


USAGE = """\
An OpenAI-compatible server on 127.0.0.1 for offline first runs, tests and benchmarks:
no key, no network. It answers chat and legacy completions, the model list, and the
Files and Batch APIs; the answer text comes from a Python function (the responder).

It prints its base URL on the first line of standard output, then serves. By default
each line read from standard input prints the statistics so far as one JSON line, and
when standard input closes it prints them once more and stops (how the benchmarks
drive it). With --until-signal it leaves standard input alone and serves until it gets
SIGTERM or SIGINT (Ctrl-C), then prints the statistics and stops: for a server started
in the background, where standard input is closed at once.
"""

EXAMPLES = """\
responders:
  senseforge.pipelines.mcsqa.dryrun:body_reply   answers every mCSQA stage, as the
                                                 scripted/mcsqa-author model does
  senseforge.llm.loopback_handler:request_text   echoes the request's last message

example:
  nohup python -m senseforge.llm.loopback --port 8765 --until-signal \\
      --responder senseforge.pipelines.mcsqa.dryrun:body_reply > loopback.log &
  senseforge build mcsqa --lang en --n 20 --model openai/loopback \\
      --base-url http://127.0.0.1:8765/v1
  kill %1     # or: kill PID; the statistics are the last line of loopback.log
"""


def parser() -> Any:
    import argparse

    found = argparse.ArgumentParser(
        prog="python -m senseforge.llm.loopback",
        description=USAGE,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    found.add_argument(
        "--responder", required=True, metavar="MODULE:FUNCTION", help="the function that writes each answer's text"
    )
    found.add_argument("--port", type=int, default=0, help="the port to listen on (default: a free one)")
    found.add_argument(
        "--until-signal",
        action="store_true",
        help="serve until SIGTERM or SIGINT, whatever standard input does (for nohup ... &)",
    )
    found.add_argument(
        "--latency", type=float, default=0.0, metavar="SECONDS", help="wait this long before each answer"
    )
    found.add_argument(
        "--fault-rate", type=float, default=0.0, metavar="SHARE", help="the share of attempts that fail on purpose"
    )
    found.add_argument("--seed", type=int, default=0, help="the seed of the failures drawn")
    found.add_argument("--capacity", type=int, help="refuse with 429 above this many requests in flight")
    found.add_argument(
        "--batch-latency", type=float, default=0.0, metavar="SECONDS", help="complete a batch this long after creation"
    )
    found.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="send with every completion answer"
    )
    found.add_argument(
        "--refuse-format",
        action="append",
        default=[],
        choices=REFUSABLE_FORMATS,
        help="answer 400 to chat requests with this response_format (json_object_schema: a json_object with a schema)",
    )
    return found


def wait_for_signal() -> int:
    """Block until SIGTERM or SIGINT comes; the signal's number."""
    import signal

    wanted = {signal.SIGTERM, signal.SIGINT}
    if hasattr(signal, "sigwait"):  # blocked before the server's threads start, so it comes here, never lost
        return signal.sigwait(wanted)
    try:  # Windows: no sigwait; Ctrl-C (and a terminate) end the sleep
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return int(signal.SIGINT)
