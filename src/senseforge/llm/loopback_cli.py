"""``python -m senseforge.llm.loopback``: the loopback server in a process of its own, for benchmarks, docs and
people trying a recipe against an API without a key (see :class:`~senseforge.llm.loopback.LoopbackOpenAI`)."""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from senseforge.errors import ConfigError
from senseforge.llm.loopback import LoopbackOpenAI, Responder
from senseforge.llm.loopback_formats import REFUSABLE_FORMATS


def _load_responder(target: str) -> Responder:
    """``module:function`` → the function."""

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"responder {target!r}: write module:function")
    try:
        responder: Responder = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"responder {target!r}: {exc}") from exc
    return responder


def _header(text: str) -> tuple[str, str]:
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


def _parser() -> Any:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m senseforge.llm.loopback",
        description=USAGE,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--responder", required=True, metavar="MODULE:FUNCTION", help="the function that writes each answer's text"
    )
    parser.add_argument("--port", type=int, default=0, help="the port to listen on (default: a free one)")
    parser.add_argument(
        "--until-signal",
        action="store_true",
        help="serve until SIGTERM or SIGINT, whatever standard input does (for nohup ... &)",
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="SECONDS", help="wait this long before each answer"
    )
    parser.add_argument(
        "--fault-rate", type=float, default=0.0, metavar="SHARE", help="the share of attempts that fail on purpose"
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of the failures drawn")
    parser.add_argument("--capacity", type=int, help="refuse with 429 above this many requests in flight")
    parser.add_argument(
        "--batch-latency", type=float, default=0.0, metavar="SECONDS", help="complete a batch this long after creation"
    )
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="send with every completion answer"
    )
    parser.add_argument(
        "--refuse-format",
        action="append",
        default=[],
        choices=REFUSABLE_FORMATS,
        help="answer 400 to chat requests with this response_format (json_object_schema: a json_object with a schema)",
    )
    return parser


def _wait_for_signal() -> int:
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


def main(argv: Sequence[str] | None = None) -> int:
    """Serve from a process of its own (so the server does not share the client's interpreter).

    Prints the base URL on the first line of stdout, then serves: until stdin closes (each
    line read prints the statistics so far as one JSON line), or with ``--until-signal``
    until SIGTERM or SIGINT; either way it prints the statistics once more and exits 0.
    ``python -m senseforge.llm.loopback --help`` says the rest.
    """
    import signal

    args = _parser().parse_args(argv)
    headers = dict(_header(text) for text in args.header)
    if args.until_signal and hasattr(signal, "pthread_sigmask"):  # before any thread starts: they inherit the mask
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        server = LoopbackOpenAI(
            _load_responder(args.responder),
            latency_s=args.latency,
            fault_rate=args.fault_rate,
            seed=args.seed,
            capacity=args.capacity,
            headers=headers,
            batch_latency_s=args.batch_latency,
            port=args.port,
            refuse_formats=args.refuse_format,
        ).start()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def stats() -> str:
        return json.dumps(
            {
                "requests": server.requests,
                "answered_ok": server.answered_ok,
                "faults_by_kind": server.faults_by_kind,
                "max_in_flight": server.max_in_flight,
                "in_flight": server.in_flight,
                "over_capacity": server.over_capacity,
                "files_uploaded": server.files_uploaded,
                "batches_created": server.batches_created,
                "first_arrival_monotonic": arrival(0),
                "last_arrival_monotonic": arrival(-1),
            }
        )

    def arrival(index: int) -> float | None:
        """When the first (``0``) or last (``-1``) request came, on this machine's monotonic clock (the client's
        too): a rate from the first leaves the client's start-up out; the last, its finishing."""
        log = server.log
        return server._started + log[index].arrived_s if log else None

    with server:
        print(server.base_url, flush=True)
        try:
            if args.until_signal:
                _wait_for_signal()
            else:
                for _line in sys.stdin:
                    print(stats(), flush=True)
        except KeyboardInterrupt:
            pass
        print(stats(), flush=True)
    return 0
