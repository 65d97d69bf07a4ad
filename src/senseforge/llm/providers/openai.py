"""The ``openai/<model>`` backend: any OpenAI-compatible HTTP endpoint.

Works with OpenAI itself and with servers that speak the same protocol (vLLM, the
llama.cpp server, Ollama …); point ``base_url`` at them. A thread's batches run on one
async client per provider, kept with its open connections from batch to batch
(:func:`~senseforge.llm.providers.openai_sending.held_client`); at most ``max_concurrency``
requests are in flight to one endpoint (base URL and model) from the whole process, however
many batches, stages or threads send them (:mod:`senseforge.llm.limits`). The SDK's own retries
are switched off: :mod:`senseforge.llm.providers.openai_sending` retries rate limits, server
errors, timeouts, dropped connections and undecodable 200 bodies itself, honours ``Retry-After``,
and times each call; every request that still fails is recorded as a
:class:`~senseforge.llm.base.Failure`. Each failed attempt, retried or not, also leaves one
line in the result's ``retry_errors``.

Results stream: ``on_result`` hears about each request as soon as it is done, so a
caller such as :class:`~senseforge.llm.cache.CachedLLM` can store it before the rest of
the batch has finished.

A request with a reply shape (:attr:`~senseforge.llm.base.GenerateRequest.reply_shape`) is sent it in the first form
the endpoint takes, learned from its refusals (:mod:`senseforge.llm.providers.openai_formats`); its completion says
whether the reply was held to it (``constrained``).

A request that asks for top log-probabilities (:attr:`~senseforge.llm.base.GenerateRequest.top_logprobs` above 0)
is sent ``logprobs: true, top_logprobs: N`` on chat completions, ``logprobs: N`` on legacy completions (online and
in a batch's lines alike), and the answer's alternatives per generated token come back in the completion's
``top_logprobs``; an endpoint that answers without them leaves it ``None``.

Log-likelihood scoring uses the legacy completions endpoint with ``echo`` and
``logprobs``: the server sends back the prompt's tokens with the log-probability of each,
and the score sums those of the tokens that carry continuation text (a token that spans
the boundary, such as a context's trailing space joined to the continuation's first word,
counts). vLLM and llama-cpp-python's server (``python -m llama_cpp.server``) answer such
requests; chat-only endpoints cannot, and give an ``unsupported`` failure, as does a server
that returns log-probabilities for generated tokens only (llama.cpp's C++ ``llama-server``,
by its issue tracker). Each scoring request asks for one generated token
(:data:`SCORING_MAX_TOKENS`), which the score leaves out: vLLM refuses ``max_tokens=0``,
and llama-cpp-python reads it as "no limit" and generates until its context is full, long
after the client has given up.

llama-cpp-python's server (0.3.36), for scoring:

* it returns prompt log-probabilities only from a model loaded with ``logits_all``, which
  its ``--logits_all`` setting does by default; it then keeps ``n_ctx`` × vocabulary floats
  of scores (2 GiB for Gemma 3 at ``--n_ctx 2048``);
* it serves one request at a time: concurrent requests wait in its queue while their
  ``timeout_s`` runs (a request whose client has gone is skipped when its turn comes; one
  already started runs to the end);
* for every echoed token it sorts the whole vocabulary in Python: about a second a token
  for Gemma 3's 262,144 entries on a small CPU, so a 30-token prompt takes half a minute.
  Give it ``max_concurrency=1`` and a ``timeout_s`` above the longest prompt's time::

    python -m llama_cpp.server --model gemma-3-270m-q4_k_m.gguf --model_alias gemma --port 8000
    senseforge eval run -m openai/gemma --base-url http://127.0.0.1:8000/v1 -d dev.jsonl \\
        -o api=completions -o max_concurrency=1 -o timeout_s=600

Its scores are not the embedded ``llamacpp/`` provider's for the same GGUF file: it loads
llama.cpp's repacked CPU weights, and it evaluates only the part of a prompt that differs
from the previous request's, where a short tail rounds differently. With the bundled Gemma 3
270M, 100 CommonsenseQA choices moved by 0.17 nats on average and up to 0.74 (the 20
predictions stayed the same); loaded without repacking and asked about the questions in
turn, it matches to 1e-6 nats (see ``tests/llm/providers/test_openai_llamacpp_server.py``).
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from senseforge.errors import ConfigError
from senseforge.llm.base import (
    Completion,
    Failure,
    GenerateRequest,
    Loglikelihood,
    LoglikelihoodRequest,
    Message,
    Progress,
    options_identity,
)
from senseforge.llm.limits import limiter_for
from senseforge.llm.providers.openai_answers import (
    Fatal,
    Problem,
    from_chat,
    from_completion,
    from_echo,
    unsupported,
)
from senseforge.llm.providers.openai_batch import BatchClient
from senseforge.llm.providers.openai_formats import (
    CONSTRAINING,
    FORMS,
    Form,
    first_form,
    format_refusal,
    memory_for,
    probe,
    response_format,
)
from senseforge.llm.providers.openai_sending import (
    OnResult,
    Retries,
    Sleep,
    async_http_client,
    held_client,
    post,
    release_held,
    run_async,
    send_batch,
    tls_context,
    tokens_of,
)

if TYPE_CHECKING:  # the SDK is imported when a client is made: a rebuild answered from the cache never makes one
    import httpx
    import openai
    from openai.types.chat import ChatCompletionMessageParam

    from senseforge.store.db import Store

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where the SDK sends requests when no base URL is configured."""

PLACEHOLDER_API_KEY = "not-needed"
"""Sent to custom endpoints when no key is set (most local servers ignore the header)."""

SCORING_MAX_TOKENS = 1
"""Tokens generated while scoring: one, left out of the score (see the module notes on why not zero)."""

_T = TypeVar("_T")
_R = TypeVar("_R")


class Options(BaseModel):
    """Settings of the ``openai`` provider."""

    model_config = ConfigDict(extra="forbid")

    OUTPUT_NEUTRAL: ClassVar[frozenset[str]] = frozenset(
        {
            "api_key_env",
            "max_concurrency",
            "max_retries",
            "timeout_s",
            "backoff_base_s",
            "backoff_max_s",
            "adaptive",
            "rpm",
            "tpm",
            "batch",
        }
    )
    """Options that cannot change a successful answer (failures are never cached), left out of the identity."""

    base_url: str | None = None
    """Endpoint, e.g. ``http://localhost:8000/v1``; default: ``$OPENAI_BASE_URL``, else OpenAI."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable that holds the API key."""
    max_concurrency: int = Field(default=8, ge=1)
    """Most requests in flight at once to the endpoint, from every stage of the process (the ceiling when
    ``adaptive``)."""
    adaptive: bool = True
    """Lower the requests in flight when the endpoint refuses them as too many (HTTP 429/503: to ¾, and wait out
    its ``Retry-After``), and raise them by one after every 25 answers in a row, up to ``max_concurrency``
    (see :mod:`senseforge.llm.limits`); off: always ``max_concurrency``."""
    rpm: int | None = Field(default=None, ge=1)
    """Most requests sent to the endpoint in any minute (an account's request limit); none by default."""
    tpm: int | None = Field(default=None, ge=1)
    """Most tokens (prompt and answer) sent in any minute, a request's counted before it goes as about a token
    per four characters plus its ``max_tokens``, then as its answer reports; none by default."""
    max_retries: int = Field(default=5, ge=0)
    """Retries per request after the first attempt (transient failures only)."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Seconds to wait for one HTTP attempt."""
    backoff_base_s: float = Field(default=0.5, ge=0)
    """First backoff delay; it doubles on every retry."""
    backoff_max_s: float = Field(default=30.0, ge=0)
    """Longest backoff delay (``Retry-After`` from the server may ask for longer, up to a minute)."""
    batch: bool = False
    """Send a build's generations through the endpoint's Batch API, at half the price: one batch per stage,
    answered within a day; the build stops as ``awaiting_batch`` and ``--resume`` collects the answers, or
    ``--wait`` keeps checking and goes on through every stage by itself (see
    :mod:`senseforge.llm.providers.openai_batch`). Scoring is never batched."""
    api: Literal["chat", "completions"] = "chat"
    """Endpoint used by :meth:`OpenAILLM.generate`: chat completions for an instruction-tuned model, or legacy
    completions for a base model (``-o api=completions``): such a model has no chat template, so every stage and
    formulation sends it plain completion prompts, and chat turns are refused."""


class OpenAILLM:
    """A model served behind an OpenAI-compatible HTTP API.

    Args:
        model: the served model name, as the endpoint knows it.
        options: provider settings.
        sleep: the coroutine used to wait between attempts (tests inject a recorder).

    Raises:
        ConfigError: no API key is set and the endpoint is OpenAI's own.
    """

    streams_results: ClassVar[bool] = True
    """``generate`` and ``loglikelihood`` take ``on_result`` and call it per finished request."""

    def __init__(self, model: str, options: Options | None = None, *, sleep: Sleep = asyncio.sleep) -> None:
        self._model = model
        self._options = options or Options()
        configured = self._options.base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._base_url = (configured or OPENAI_BASE_URL).rstrip("/")
        key = os.environ.get(self._options.api_key_env) or None
        if key is None:
            if self._is_openai():
                raise ConfigError(
                    f"no API key for {self._base_url}: set ${self._options.api_key_env}, "
                    "or give base_url for a server that needs no key"
                )
            key = PLACEHOLDER_API_KEY
        self._api_key = key
        # every provider object for this endpoint shares its slots (llm/limits.py): two stages in flight together
        # cannot send more than the endpoint's limit
        options = self._options
        self._retries = Retries(options.max_retries, options.backoff_base_s, options.backoff_max_s, sleep)
        self._formats = memory_for(self._base_url, self._model)
        self._limiter = limiter_for(
            self._base_url,
            self._model,
            options.max_concurrency,
            adaptive=options.adaptive,
            rpm=options.rpm,
            tpm=options.tpm,
            hold_s=options.timeout_s,
        )

    @property
    def batch_api(self) -> BatchClient | None:
        """The endpoint's Batch API when ``batch`` is on, else ``None`` (the cache layer sends through it)."""
        if not self._options.batch:
            return None
        chat = self._options.api == "chat"
        return BatchClient(
            client=self._sync_client,
            model=self._model,
            base_url=self._base_url,
            url="/v1/chat/completions" if chat else "/v1/completions",
            body=self._chat_body if chat else self._completion_body,
            parse=from_chat if chat else from_completion,
            form=(lambda: self._formats.form) if chat else (lambda: None),
            learn=self._learn_form if chat else None,
            constrained=self._held_to_shape,
        )

    def _held_to_shape(self, request: GenerateRequest, form: str | None) -> bool:
        """Whether a request of a batch sent in ``form`` was held to its shape."""
        shape = request.reply_shape
        if shape is None or shape.json_schema is None or form not in FORMS:
            return False
        return first_form(shape, form) in CONSTRAINING

    def _learn_form(self, request: GenerateRequest) -> None:
        """Before a batch: the form the endpoint takes for ``request``'s shape (see :func:`.openai_formats.probe`)."""
        if request.reply_shape is not None:
            probe(self._formats, request.reply_shape, self._sync_client, self._model)

    def _sync_client(self) -> openai.OpenAI:
        import openai

        return openai.OpenAI(
            api_key=self._api_key,
            base_url=self._base_url,
            timeout=self._options.timeout_s,
            max_retries=self._options.max_retries,
            http_client=openai.DefaultHttpxClient(verify=tls_context()),
        )

    def _is_openai(self) -> bool:
        host = self._base_url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
        return host == "openai.com" or host.endswith(".openai.com")

    @property
    def name(self) -> str:
        """The ``provider/model`` string."""
        return f"openai/{self._model}"

    @property
    def options(self) -> Options:
        """The provider settings in use."""
        return self._options

    def identity(self) -> dict[str, str]:
        """The served model name, the endpoint it is served from, and the options that can change an answer.

        ``base_url`` is there as resolved (option, else ``$OPENAI_BASE_URL``, else OpenAI), so
        the options entry leaves it out.
        """
        return {
            "model": self._model,
            "base_url": self._base_url,
            **options_identity(self._options, covered={"base_url"}),
        }

    def chat_template(self) -> str | None:
        """``server`` for a chat endpoint (the server applies the model's template); ``None`` for a model declared
        a base model with ``api='completions'``, which is then sent completion prompts on every path."""
        return "server" if self._options.api == "chat" else None

    def close(self) -> None:
        """Close the client the calling thread kept for this provider's batches (another thread's closes at that
        thread's next batch after the provider is gone, or with the thread)."""
        release_held(self)

    # -- public verbs ------------------------------------------------------------------------

    def generate(
        self,
        requests: Sequence[GenerateRequest],
        progress: Progress | None = None,
        *,
        on_result: OnResult[Completion] | None = None,
    ) -> list[Completion]:
        """One completion per request, in order; failed requests carry a :class:`Failure`.

        Args:
            requests: the generation requests.
            progress: called with 1 whenever a request finishes.
            on_result: called with the request's index and its completion as soon as that
                request finishes, before ``progress``. It runs on a worker thread, so that
                slow work in it (a database write) does not hold up requests in flight; an
                exception it raises ends the batch.

        Returns:
            The completions, in the order of ``requests``.
        """
        if not requests:
            return []
        return run_async(self._batch(list(requests), self._generate_one, progress, on_result))

    def loglikelihood(
        self,
        requests: Sequence[LoglikelihoodRequest],
        progress: Progress | None = None,
        *,
        on_result: OnResult[Loglikelihood] | None = None,
    ) -> list[Loglikelihood]:
        """Score each continuation after its context via the completions endpoint's echoed log-probabilities.

        Args:
            requests: the scoring requests.
            progress: called with 1 whenever a request finishes.
            on_result: called with the request's index and its score as soon as that request
                finishes, before ``progress`` (on a worker thread, as for :meth:`generate`).

        Returns:
            The scores, in the order of ``requests``; endpoints that cannot echo
            log-probabilities give ``unsupported`` failures.
        """
        if not requests:
            return []
        return run_async(self._batch(list(requests), self._score_one, progress, on_result))

    # -- batching (the sending and retries: openai_sending.py) -------------------------------

    async def _batch(
        self,
        requests: list[_T],
        one: Callable[[openai.AsyncOpenAI, _T], Awaitable[_R]],
        progress: Progress | None,
        on_result: OnResult[_R] | None = None,
    ) -> list[_R]:
        held = await held_client(self, self._async_client)
        if held is not None:
            return await send_batch(held, requests, one, progress, on_result, close=False)
        return await send_batch(self._async_client(), requests, one, progress, on_result)

    def _async_client(self) -> openai.AsyncOpenAI:
        """A client for one thread's batches (see :func:`.openai_sending.held_client`); its answers' headers go to
        the endpoint's limiter. It holds this provider weakly, so that the provider (and its limiter) can go while
        the thread keeps the client."""
        import openai

        return openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self._base_url,
            timeout=self._options.timeout_s,
            max_retries=0,
            http_client=async_http_client({"response": [_heard(self)]}),
        )

    # -- generation --------------------------------------------------------------------------

    async def _generate_one(self, client: openai.AsyncOpenAI, request: GenerateRequest) -> Completion:
        started = time.perf_counter()
        if self._options.api == "completions" and request.messages is not None:
            return Completion(
                attempts=0,
                failure=Failure(
                    kind="unsupported",
                    message=(
                        f"{self.name} is declared a base model (api='completions'): it takes plain prompts, not "
                        "chat turns (senseforge.llm.prompting.fit writes them); for a chat model drop "
                        "-o api=completions"
                    ),
                ),
            )

        async def attempt() -> Completion:
            if self._options.api == "chat":
                return await self._chat(client, request)
            return await self._complete(client, request)

        outcome, said = await self._retries.run(attempt, self._limiter, tokens_of(request))
        sent = {"latency_s": time.perf_counter() - started, **said}
        if isinstance(outcome, Problem):
            return Completion(failure=outcome.failure(), **sent)
        return outcome.model_copy(update=sent)

    def _sampling(self, request: GenerateRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self._model,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
        }
        if request.seed is not None:
            params["seed"] = request.seed
        if request.stop:
            params["stop"] = list(request.stop)
        return params

    def _form(self, request: GenerateRequest) -> Form | None:
        """The form a chat request's reply shape is sent in (see :mod:`.openai_formats`); ``None`` without a
        JSON-schema shape."""
        shape = request.reply_shape
        if shape is None or shape.json_schema is None:
            return None
        return first_form(shape, self._formats.form)

    def _chat_body(self, request: GenerateRequest, form: Form | None = None) -> dict[str, Any]:
        """A chat request's body (online, and as a line of a batch), its shape sent in ``form`` (default: the form
        learned for the endpoint)."""
        params = self._sampling(request)
        form = form or self._form(request)
        if form is not None and request.reply_shape is not None:
            shaped = response_format(request.reply_shape, form)  # the form decides, json_mode or not
            if shaped is not None:
                params["response_format"] = shaped
        elif request.json_mode:
            params["response_format"] = {"type": "json_object"}
        if request.top_logprobs:
            params["logprobs"] = True
            params["top_logprobs"] = request.top_logprobs
        return {"messages": [_message(message) for message in request.as_messages()], **params}

    def _completion_body(self, request: GenerateRequest) -> dict[str, Any]:
        """A completions request's body (online, and as a line of a batch)."""
        assert request.prompt is not None
        params = self._sampling(request)
        if request.top_logprobs:
            params["logprobs"] = request.top_logprobs
        return {"prompt": request.prompt, **params}

    async def _chat(self, client: openai.AsyncOpenAI, request: GenerateRequest) -> Completion:
        import openai
        from openai.types.chat import ChatCompletion

        form = self._form(request)
        if form is None:
            answer = from_chat(await post(client, "/chat/completions", self._chat_body(request), ChatCompletion))
            return answer if request.reply_shape is None else answer.model_copy(update={"constrained": False})
        while True:  # a refused form is followed at once by the next, within this attempt (no failed record)
            try:
                body = self._chat_body(request, form)
                answer = from_chat(await post(client, "/chat/completions", body, ChatCompletion))
            except openai.APIStatusError as exc:
                refusal = format_refusal(exc) if form != "none" else None
                if refusal is None:
                    raise
                form = self._formats.refused(form, refusal)
                continue
            self._formats.answered(form)
            return answer.model_copy(update={"constrained": form in CONSTRAINING})

    async def _complete(self, client: openai.AsyncOpenAI, request: GenerateRequest) -> Completion:
        from openai.types import Completion as TextCompletion

        answer = from_completion(await post(client, "/completions", self._completion_body(request), TextCompletion))
        return answer if request.reply_shape is None else answer.model_copy(update={"constrained": False})

    # -- scoring -----------------------------------------------------------------------------

    async def _score_one(self, client: openai.AsyncOpenAI, request: LoglikelihoodRequest) -> Loglikelihood:
        started = time.perf_counter()

        async def attempt() -> Loglikelihood:
            return await self._score(client, request)

        text = request.context + request.continuation
        outcome, said = await self._retries.run(attempt, self._limiter, len(text) / 4 + SCORING_MAX_TOKENS)
        sent = {"latency_s": time.perf_counter() - started, **said}
        if isinstance(outcome, Problem):
            return Loglikelihood(failure=outcome.failure(), **sent)
        return outcome.model_copy(update=sent)

    async def _score(self, client: openai.AsyncOpenAI, request: LoglikelihoodRequest) -> Loglikelihood:
        import openai
        from openai.types import Completion as TextCompletion

        prompt = request.context + request.continuation
        try:
            body = {
                "model": self._model,
                "prompt": prompt,
                "echo": True,
                "logprobs": 1,
                "max_tokens": SCORING_MAX_TOKENS,
                "temperature": 0.0,
            }
            response: object = await post(client, "/completions", body, TextCompletion)
        except openai.APIStatusError as exc:
            if exc.status_code in (400, 404, 405, 422, 501):
                raise Fatal(unsupported(f"the server answered HTTP {exc.status_code}: {exc.message}", exc)) from exc
            raise
        return from_echo(response, prompt, len(request.context))


def _heard(llm: OpenAILLM) -> Callable[[httpx.Response], Awaitable[None]]:
    """A response hook that hands every answer's ``x-ratelimit-*`` headers to ``llm``'s endpoint limiter (see
    :mod:`senseforge.llm.limits`) while ``llm`` lives."""
    ref = weakref.ref(llm)

    async def heard(response: httpx.Response) -> None:
        alive = ref()
        if alive is not None:
            alive._limiter.heard(response.headers)

    return heard


def _message(message: Message) -> ChatCompletionMessageParam:
    if message.role == "system":
        return {"role": "system", "content": message.content}
    if message.role == "assistant":
        return {"role": "assistant", "content": message.content}
    return {"role": "user", "content": message.content}


def chat_template_of(model: str, options: Options) -> str | None:
    """What :meth:`OpenAILLM.chat_template` will answer, before a client exists (for config-time decisions)."""
    del model
    return "server" if options.api == "chat" else None


def create(model: str, options: Options, store: Store | None = None) -> OpenAILLM:
    """Registry factory for ``openai/<model>``."""
    del store
    return OpenAILLM(model, options)
