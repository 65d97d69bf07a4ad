"""The loopback server's Files and Batch API, driven by the real ``openai`` SDK."""

from __future__ import annotations

import io
import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from senseforge.errors import ConfigError
from senseforge.llm.loopback import LoopbackOpenAI, main
from senseforge.llm.loopback_handler import echo_logprobs, request_text

openai = pytest.importorskip("openai")
from openai.types import Completion  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


def shout(body: dict[str, Any]) -> str:
    text = request_text(body)
    if text == "boom":
        raise ValueError("the responder blew up")
    return f"answer: {text.upper()}"


def client(server: LoopbackOpenAI) -> Any:
    return openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10.0)


def chat_line(custom_id: str, text: str, *, url: str = CHAT) -> dict[str, Any]:
    body = {"model": "loopback", "messages": [{"role": "user", "content": text}]}
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def upload(sdk: Any, lines: list[dict[str, Any]]) -> Any:
    return sdk.files.create(file=("in.jsonl", jsonl(lines), "application/jsonl"), purpose="batch")


def submit(sdk: Any, lines: list[dict[str, Any]], endpoint: str = CHAT, **options: Any) -> Any:
    uploaded = upload(sdk, lines)
    return sdk.batches.create(input_file_id=uploaded.id, endpoint=endpoint, completion_window="24h", **options)


def read_lines(sdk: Any, file_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in sdk.files.content(file_id).text.splitlines()]


def test_a_batch_runs_from_upload_to_output_file() -> None:
    lines = [chat_line("q1", "one"), chat_line("q2", "two é"), chat_line("q3", "three")]
    with LoopbackOpenAI(shout, batch_latency_s=None) as server:
        sdk = client(server)
        uploaded = upload(sdk, lines)
        assert (uploaded.object, uploaded.purpose, uploaded.status, uploaded.filename) == (
            "file",
            "batch",
            "processed",
            "in.jsonl",
        )
        assert uploaded.bytes == len(jsonl(lines)) and uploaded.id.startswith("file-")
        assert sdk.files.retrieve(uploaded.id).bytes == uploaded.bytes
        assert sdk.files.content(uploaded.id).content == jsonl(lines)

        created = sdk.batches.create(
            input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h", metadata={"run": "t1"}
        )
        assert created.id.startswith("batch_") and created.status == "in_progress"
        assert created.output_file_id is None and created.error_file_id is None and created.completed_at is None
        assert created.request_counts.total == 3 and created.request_counts.completed == 0
        assert sdk.batches.retrieve(created.id).status == "in_progress"  # never due by itself
        assert [batch.id for batch in sdk.batches.list() if (batch.metadata or {}).get("run") == "t1"] == [created.id]

        assert server.finish_batches() == 1
        done = sdk.batches.retrieve(created.id)
        assert done.status == "completed" and done.completed_at is not None and done.error_file_id is None
        assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (3, 3, 0)
        assert done.metadata == {"run": "t1"}
        output = read_lines(sdk, done.output_file_id)
        assert [line["custom_id"] for line in output] == ["q1", "q2", "q3"]
        texts = []
        for line in output:
            assert line["error"] is None and line["id"].startswith("batch_req_")
            assert line["response"]["status_code"] == 200 and line["response"]["request_id"].startswith("req_")
            completion = ChatCompletion.model_validate(line["response"]["body"])
            texts.append(completion.choices[0].message.content)
        assert texts == ["answer: ONE", "answer: TWO É", "answer: THREE"]
        assert sdk.files.retrieve(done.output_file_id).purpose == "batch_output"
        assert server.finish_batches() == 0
        # none of it was an online completion attempt
        assert server.requests == 0 and server.answered_ok == 0 and server.log == []
        assert (server.files_uploaded, server.batches_created) == (1, 1)


def test_a_bad_input_line_is_refused_with_its_line_number() -> None:
    with LoopbackOpenAI(shout, batch_latency_s=None) as server:
        sdk = client(server)
        wrong_url = [chat_line("a", "one"), chat_line("b", "two", url=COMPLETIONS)]
        with pytest.raises(openai.BadRequestError, match="line 2") as refused:
            submit(sdk, wrong_url)
        assert refused.value.status_code == 400
        with pytest.raises(openai.BadRequestError, match=r"line 2.*used twice"):
            submit(sdk, [chat_line("a", "one"), chat_line("a", "two")])
        with pytest.raises(openai.BadRequestError, match=r"line 1.*not JSON"):
            sdk.batches.create(
                input_file_id=sdk.files.create(file=("x.jsonl", b"{oops\n"), purpose="batch").id,
                endpoint=CHAT,
                completion_window="24h",
            )
        good = upload(sdk, [chat_line("a", "one")]).id
        with pytest.raises(openai.BadRequestError, match="endpoint"):
            sdk.batches.create(input_file_id=good, endpoint="/v1/embeddings", completion_window="24h")
        with pytest.raises(openai.BadRequestError, match="completion_window"):
            sdk.batches.create(input_file_id=good, endpoint=CHAT, completion_window="1h")
        with pytest.raises(openai.BadRequestError, match="file-99"):
            sdk.batches.create(input_file_id="file-99", endpoint=CHAT, completion_window="24h")
        with pytest.raises(openai.BadRequestError, match="purpose"):
            sdk.files.create(file=("in.jsonl", jsonl([chat_line("a", "one")])), purpose="fine-tune")
        assert server.batches_created == 0 and server.requests == 0


def test_a_line_the_responder_raises_on_goes_to_the_error_file() -> None:
    lines = [chat_line("ok1", "fine"), chat_line("bad", "boom"), chat_line("ok2", "also fine")]
    with LoopbackOpenAI(shout, batch_latency_s=None) as server:
        sdk = client(server)
        batch = submit(sdk, lines)
        server.finish_batches()
        done = sdk.batches.retrieve(batch.id)
        assert done.status == "completed" and done.error_file_id is not None
        assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (3, 2, 1)
        assert [line["custom_id"] for line in read_lines(sdk, done.output_file_id)] == ["ok1", "ok2"]
        [failed] = read_lines(sdk, done.error_file_id)
        assert failed["custom_id"] == "bad" and failed["error"] is None
        assert failed["response"]["status_code"] == 500
        error = failed["response"]["body"]["error"]
        assert "ValueError: the responder blew up" in error["message"] and error["code"] == "500"
        assert server.requests == 0


def test_a_completions_batch_answers_as_the_online_path_refusals_included() -> None:
    scored = {"model": "m", "prompt": "The sky is blue", "echo": True, "logprobs": 1, "max_tokens": 1}
    refused = {**scored, "max_tokens": 0}
    lines = [
        {"custom_id": "plain", "method": "POST", "url": COMPLETIONS, "body": {"model": "m", "prompt": "hi"}},
        {"custom_id": "scored", "method": "POST", "url": COMPLETIONS, "body": scored},
        {"custom_id": "refused", "method": "POST", "url": COMPLETIONS, "body": refused},
    ]
    with LoopbackOpenAI(shout, batch_latency_s=None, fault_rate=1.0, latency_s=5.0) as server:
        sdk = client(server)
        batch = submit(sdk, lines, endpoint=COMPLETIONS)
        server.finish_batches()  # neither the 5 s latency nor the certain faults apply to batch lines
        done = sdk.batches.retrieve(batch.id)
        assert (done.request_counts.completed, done.request_counts.failed) == (2, 1)
        plain, scored_line = read_lines(sdk, done.output_file_id)
        assert Completion.model_validate(plain["response"]["body"]).choices[0].text == "answer: HI"
        # the first token has no log-probability (as vLLM answers), which the SDK's strict model would refuse
        [choice] = scored_line["response"]["body"]["choices"]
        text, logprobs, _ = echo_logprobs("The sky is blue", shout(scored), 1)
        assert (choice["text"], choice["logprobs"]) == (text, logprobs)
        [refusal] = read_lines(sdk, done.error_file_id)
        assert refusal["custom_id"] == "refused" and refusal["response"]["status_code"] == 400
        assert "max_tokens" in refusal["response"]["body"]["error"]["message"]
        assert server.requests == 0 and server.faults_by_kind == {}


def test_a_batch_with_no_latency_completes_on_its_first_read() -> None:
    with LoopbackOpenAI(shout, batch_latency_s=0.0) as server:
        sdk = client(server)
        batch = submit(sdk, [chat_line("only", "now")])
        done = sdk.batches.retrieve(batch.id)
        assert done.status == "completed" and done.request_counts.completed == 1
        assert sdk.batches.retrieve(batch.id).output_file_id == done.output_file_id  # completed once
        assert server.requests == 0


def test_a_batch_with_latency_completes_once_due() -> None:
    with LoopbackOpenAI(shout, batch_latency_s=0.2) as server:
        sdk = client(server)
        batch = submit(sdk, [chat_line("only", "later")])
        assert sdk.batches.retrieve(batch.id).status == "in_progress"
        for _ in range(100):
            if sdk.batches.retrieve(batch.id).status == "completed":
                break
            time.sleep(0.05)
        assert sdk.batches.retrieve(batch.id).status == "completed"


def test_cancel_stops_an_unfinished_batch_and_leaves_a_finished_one() -> None:
    with LoopbackOpenAI(shout, batch_latency_s=None) as server:
        sdk = client(server)
        first, second = submit(sdk, [chat_line("a", "one")]), submit(sdk, [chat_line("b", "two")])
        cancelled = sdk.batches.cancel(first.id)
        assert cancelled.status == "cancelled" and cancelled.output_file_id is None
        assert server.finish_batches() == 1  # only the second
        assert sdk.batches.retrieve(first.id).status == "cancelled"
        assert sdk.batches.cancel(first.id).status == "cancelled"
        finished = sdk.batches.cancel(second.id)
        assert finished.status == "completed" and finished.output_file_id is not None
        assert server.requests == 0


def test_listing_is_newest_first_and_pages() -> None:
    with LoopbackOpenAI(shout, batch_latency_s=None) as server:
        sdk = client(server)
        ids = [submit(sdk, [chat_line("a", str(i))]).id for i in range(3)]
        page = sdk.batches.list(limit=2)
        assert [batch.id for batch in page.data] == [ids[2], ids[1]] and page.has_more
        assert [batch.id for batch in sdk.batches.list(limit=2)] == ids[::-1]  # the SDK follows the cursor
        with urllib.request.urlopen(server.base_url + "/batches?limit=5", timeout=5) as response:
            listing = json.loads(response.read())
        assert listing["object"] == "list" and listing["has_more"] is False
        assert (listing["first_id"], listing["last_id"]) == (ids[2], ids[0])
        assert server.batches_created == 3 and server.files_uploaded == 3


def test_unknown_ids_get_404_with_the_usual_error_shape() -> None:
    with LoopbackOpenAI(shout) as server:
        sdk = client(server)
        with pytest.raises(openai.NotFoundError):
            sdk.files.retrieve("file-7")
        with pytest.raises(openai.NotFoundError):
            sdk.files.content("file-7")
        with pytest.raises(openai.NotFoundError):
            sdk.batches.retrieve("batch_7")
        with pytest.raises(openai.NotFoundError):
            sdk.batches.cancel("batch_7")
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.base_url + "/files/file-7", timeout=5)
        assert missing.value.code == 404
        error = json.loads(missing.value.read())["error"]
        assert set(error) == {"message", "type", "code"} and error["code"] == "404"
        assert server.log == [] and server.requests == 0


def test_negative_batch_latency_is_refused() -> None:
    with pytest.raises(ConfigError, match="batch_latency_s"):
        LoopbackOpenAI(shout, batch_latency_s=-1.0)


def test_main_prints_the_batch_counters(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["--responder", "senseforge.llm.loopback_handler:request_text", "--batch-latency", "0.5"]) == 0
    base_url, stats = capsys.readouterr().out.splitlines()
    assert base_url.startswith("http://127.0.0.1:")
    assert json.loads(stats)["files_uploaded"] == 0 and json.loads(stats)["batches_created"] == 0
