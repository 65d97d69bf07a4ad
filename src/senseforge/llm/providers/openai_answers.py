"""How the ``openai`` provider reads what an endpoint answers: a successful answer as a
:class:`~senseforge.llm.base.Completion` (online, or a line of a batch's output file), and a failed attempt as a
:class:`Problem`: its failure kind, whether another attempt may succeed, and how long the endpoint asks us to wait.
"""

from __future__ import annotations

import email.utils
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from senseforge.llm.base import Completion, Failure, FailureKind, Loglikelihood, TopLogprobs

if TYPE_CHECKING:  # the SDK is imported where an answer is read (a cached rebuild never imports it: a second)
    import openai
    from openai.types import Completion as SdkCompletion
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletion
    from openai.types.chat.chat_completion import ChoiceLogprobs
    from openai.types.completion_choice import Logprobs

    _A = TypeVar("_A", ChatCompletion, SdkCompletion)

__all__ = [
    "Echoed",
    "Fatal",
    "Problem",
    "Undecodable",
    "classify",
    "echoed_prompt",
    "from_chat",
    "from_completion",
    "from_echo",
    "one_line",
    "parse_retry_after",
    "token_offsets",
    "unsupported",
]

MESSAGE_CHARS = 300
"""Longest failure message kept (longer ones end in an ellipsis)."""
RETRY_LINE_CHARS = 160
"""Longest line per failed attempt in a result's ``retry_errors``."""


@dataclass(frozen=True)
class Problem:
    """A classified failure of one attempt."""

    kind: FailureKind
    message: str
    status: int | None = None
    transient: bool = False
    retry_after_s: float | None = None

    def failure(self) -> Failure:
        return Failure(kind=self.kind, message=self.message, status=self.status)

    def line(self) -> str:
        """This failed attempt in one short line: ``429 rate_limit: …``, ``timeout: …``.

        An HTTP error status leads the line, and the message drops the status it repeats
        (``HTTP 429:`` from us, ``Error code: 429 -`` from the SDK).
        """
        if self.status is not None and self.status >= 400:
            detail = self.message.removeprefix(f"HTTP {self.status}: ").removeprefix(f"Error code: {self.status} - ")
            return one_line(f"{self.status} {self.kind}: {detail}", RETRY_LINE_CHARS)
        return one_line(f"{self.kind}: {self.message}", RETRY_LINE_CHARS)


class Fatal(Exception):
    """Raised inside an attempt for an answer that retrying will not change."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


class Undecodable(Exception):
    """Raised inside an attempt for a 200 answer whose body is not the expected JSON."""


def one_line(text: object, limit: int = MESSAGE_CHARS) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asks us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date. Returns None when neither
    header is present or readable.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        try:
            millis = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(millis) and millis >= 0:
                return millis / 1000.0
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def classify(exc: BaseException) -> Problem:
    """Map an exception raised by one attempt to a failure kind, and whether to retry."""
    import openai

    if isinstance(exc, Fatal):
        return exc.problem
    dropped = _dropped(exc)
    if dropped is not None:
        detail = f"Connection error. ({type(dropped).__name__}: {dropped})"
        return Problem("connection", one_line(detail), transient=True)
    if isinstance(exc, openai.APITimeoutError):
        return Problem("timeout", one_line(exc), transient=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f"{exc} ({type(cause).__name__}: {cause})" if cause is not None else str(exc)
        return Problem("connection", one_line(detail), transient=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = one_line(f"HTTP {status}: {exc.message}")
        retry_after = parse_retry_after(exc.response.headers)
        if status == 429:
            return Problem("rate_limit", message, status, True, retry_after)
        if status >= 500:
            return Problem("server_error", message, status, True, retry_after)
        if status == 408:
            return Problem("timeout", message, status, True, retry_after)
        if status in (401, 403):
            return Problem("auth", message, status)
        if status == 404:
            return Problem("not_found", message, status)
        return Problem("bad_request", message, status)
    if isinstance(exc, openai.APIResponseValidationError):
        return Problem("truncated", one_line(f"invalid response body: {exc.message}"), exc.status_code, True)
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError, Undecodable)):
        return Problem("truncated", one_line(f"response body could not be decoded: {exc}"), 200, True)
    return Problem("backend", one_line(f"{type(exc).__name__}: {exc}"))


def _dropped(exc: BaseException) -> BaseException | None:
    """The connection error under an SDK timeout that was none: the aiohttp transport (see
    :mod:`.openai_sending`) hands every ``aiohttp.ClientConnectionError``, a refused or dropped connection too, on as
    a connect timeout; ``None`` for a real timeout or another transport."""
    import openai

    if not isinstance(exc, openai.APITimeoutError) or exc.__cause__ is None:
        return None
    cause = exc.__cause__.__cause__
    if cause is None or isinstance(cause, TimeoutError) or type(cause).__module__.split(".")[0] != "aiohttp":
        return None
    return cause if any(kind.__name__ == "ClientConnectionError" for kind in type(cause).__mro__) else None


def from_chat(response: object) -> Completion:
    """A chat.completion answer (an SDK object, or its JSON from a batch's output file) as a completion."""
    from openai.types.chat import ChatCompletion

    chat = _answer(response, ChatCompletion, "chat.completion")
    choice = chat.choices[0]
    return _completion(choice.message.content, choice.finish_reason, chat.usage, _chat_top(choice.logprobs))


def from_completion(response: object) -> Completion:
    """A text_completion answer (an SDK object, or its JSON from a batch's output file) as a completion."""
    from openai.types import Completion as SdkCompletion

    completion = _answer(response, SdkCompletion, "text_completion")
    choice = completion.choices[0]
    return _completion(choice.text, choice.finish_reason, completion.usage, _completion_top(choice.logprobs))


def _chat_top(logprobs: ChoiceLogprobs | None) -> TopLogprobs | None:
    """A chat answer's ``logprobs.content`` as top log-probabilities per generated token (the token written
    alone where the answer lists no alternatives), or ``None`` when it has none."""
    if logprobs is None or not logprobs.content:
        return None
    return tuple(
        _ranked([(alt.token, alt.logprob) for alt in token.top_logprobs] or [(token.token, token.logprob)])
        for token in logprobs.content
    )


def _completion_top(logprobs: Logprobs | None) -> TopLogprobs | None:
    """A text completion's ``logprobs`` (``top_logprobs``: one token → log-probability object per generated
    token) as top log-probabilities per generated token, or ``None`` when it has none."""
    if logprobs is None or not logprobs.tokens:
        return None
    tokens = logprobs.tokens
    tops: list[dict[str, float] | None] = [*logprobs.top_logprobs] if logprobs.top_logprobs else [None] * len(tokens)
    values: list[float | None] = [*logprobs.token_logprobs] if logprobs.token_logprobs else [None] * len(tokens)
    if not len(tops) == len(values) == len(tokens):
        raise Undecodable("tokens and log-probabilities differ in length")
    out = []
    for token, value, top in zip(tokens, values, tops, strict=True):
        if top:
            out.append(_ranked(list(top.items())))
        else:
            out.append(_ranked([] if value is None else [(token, value)]))
    return tuple(out)


def _ranked(alternatives: Sequence[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    """The alternatives, the most likely first (ties in the order given)."""
    return tuple(sorted(alternatives, key=lambda pair: -pair[1]))


def _answer(response: object, kind: type[_A], name: str) -> _A:
    """``response`` as ``kind`` (validated first when it is JSON), with at least one choice."""
    if isinstance(response, dict):
        response = kind.model_validate(response)
    if not isinstance(response, kind) or not getattr(response, "choices", None):
        raise Undecodable(f"expected a {name} object, got {one_line(response)[:80]!r}")
    return response


def _completion(
    text: str | None, finish_reason: str | None, usage: CompletionUsage | None, top: TopLogprobs | None = None
) -> Completion:
    return Completion(
        text=text or "",
        finish_reason=finish_reason,
        tokens_in=usage.prompt_tokens if usage else None,
        tokens_out=usage.completion_tokens if usage else None,
        top_logprobs=top,
    )


@dataclass(frozen=True)
class Echoed:
    """One token of the echoed prompt: its text, the characters it covers, its log-probability."""

    text: str
    start: int
    end: int
    logprob: float | None
    top: Mapping[str, float] | None


def echoed_prompt(logprobs: Logprobs, prompt: str) -> list[Echoed]:
    """The echoed tokens that belong to ``prompt``, without the generated ones that follow it.

    With ``text_offset``, the prompt's tokens are those that start inside it (a generated
    token starts at its end). Without, the echoed tokens must spell the prompt: the prompt's
    are the fewest leading tokens that do, and their offsets are counted from their lengths.

    Raises:
        Undecodable: the lists of the answer differ in length.
        Fatal: without ``text_offset``, the echoed tokens do not spell the prompt.
    """
    tokens = logprobs.tokens or []
    values = logprobs.token_logprobs or []
    tops: list[dict[str, float] | None] = [*logprobs.top_logprobs] if logprobs.top_logprobs else [None] * len(tokens)
    given = logprobs.text_offset
    if not len(tokens) == len(values) == len(tops) == len(given if given else tokens):
        raise Undecodable("tokens, offsets and log-probabilities differ in length")
    if given:
        offsets = list(given)
        keep = next((i for i, offset in enumerate(offsets) if offset >= len(prompt)), len(offsets))
    else:
        offsets = token_offsets(tokens)
        keep = next((i + 1 for i, token in enumerate(tokens) if offsets[i] + len(token) >= len(prompt)), 0)
        if "".join(tokens[:keep]) != prompt:
            raise Fatal(
                Problem(
                    "backend",
                    "the echoed tokens do not spell the prompt and the answer has no text_offset: "
                    "the continuation's tokens cannot be found",
                )
            )
    ends = [*offsets[1:keep], len(prompt)]
    return [Echoed(tokens[i], offsets[i], ends[i], values[i], tops[i]) for i in range(keep)]


def from_echo(response: object, prompt: str, start: int) -> Loglikelihood:
    """A scoring answer (a completion that echoes ``prompt`` with log-probabilities) as the score of the text from
    character ``start`` on: the sum over the echoed tokens that end past ``start``, and whether each was the
    likeliest token.

    Raises:
        Undecodable: the answer is not a text completion.
        Fatal: it holds no log-probabilities of the prompt, or none for the continuation's first token.
    """
    from openai.types import Completion as SdkCompletion

    if not isinstance(response, SdkCompletion) or not getattr(response, "choices", None):
        raise Undecodable(f"expected a text_completion object, got {one_line(response)[:80]!r}")
    logprobs = response.choices[0].logprobs
    if logprobs is None or not logprobs.tokens or logprobs.token_logprobs is None:
        raise Fatal(unsupported("the answer has no echoed log-probabilities"))
    usage = response.usage
    echoed = echoed_prompt(logprobs, prompt)
    if not echoed:
        raise Fatal(unsupported("the answer has log-probabilities of generated tokens only, none of the prompt"))
    picked = [token for token in echoed if token.end > start]
    if not picked:
        raise Fatal(Problem("backend", "no echoed token falls inside the continuation"))
    total = 0.0
    greedy = True
    for token in picked:
        if token.logprob is None:
            raise Fatal(Problem("bad_request", "the continuation's first token has no log-probability: give a context"))
        total += token.logprob
        top = token.top
        if not top:
            greedy = False
            continue
        best = max(top, key=lambda text: top[text])
        greedy = greedy and (token.text == best or top.get(token.text, -math.inf) >= top[best])
    return Loglikelihood(
        logprob=total,
        is_greedy=greedy,
        n_tokens=len(picked),
        tokens_in=usage.prompt_tokens if usage else None,
        tokens_out=usage.completion_tokens if usage else None,
    )


def unsupported(detail: str, exc: openai.APIStatusError | None = None) -> Problem:
    return Problem(
        "unsupported",
        one_line(
            "log-likelihood scoring needs a completions endpoint that echoes prompt log-probabilities "
            "(echo=True, logprobs=1), as vLLM and llama-cpp-python's server (python -m llama_cpp.server) offer; "
            f"chat-only endpoints cannot score: {detail}"
        ),
        exc.status_code if exc is not None else None,
    )


def token_offsets(tokens: Sequence[str]) -> list[int]:
    """Character offsets of ``tokens``, for servers that echo tokens but no ``text_offset``."""
    offsets, position = [], 0
    for token in tokens:
        offsets.append(position)
        position += len(token)
    return offsets
