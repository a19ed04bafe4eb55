"""A fake OpenAI-compatible server for tests: real HTTP on 127.0.0.1, scripted answers, no mocks.

In a test (pytest puts tests/ on sys.path, as tests/ has a conftest.py and no __init__.py):

    from fake_openai import fake_openai, reply, rate_limited  # noqa: F401  (the import registers the fixture)

    def test_x(fake_openai):
        fake_openai.script([rate_limited(), reply("```python\\n...```")])
        ... OpenAIConfig(base_url=fake_openai.base_url, api_key="sk-test") ...
        assert len(fake_openai.requests) == 2

Each POST to /v1/chat/completions takes the next behaviour of the script; once the script is used up,
the server answers 400 "script exhausted" (not retried by the SDK, so the test fails fast and says why).

Standalone, for a run against hand-written answers (e.g. on the GPU machine):

    python tests/fake_openai.py --port 8000 answer1.md answer2.md ...   # every completion cycles through them
    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=sk-fake agent run --llm openai ...
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

try:  # the fixture for the suite; the script below runs without pytest
    import pytest
except ImportError:  # pragma: no cover - standalone use
    pytest = None  # type: ignore[assignment]

CHAT_PATH = "/v1/chat/completions"


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


# A behaviour turns one request body into one response.
Behaviour = Callable[[dict[str, Any]], Response]


def _json(status: int, obj: object, headers: dict[str, str] | None = None, delay_s: float = 0.0) -> Response:
    return Response(status, json.dumps(obj).encode(), headers or {}, delay_s)


def _error(status: int, message: str, type_: str, code: str | None, headers: dict[str, str] | None = None) -> Response:
    return _json(status, {"error": {"message": message, "type": type_, "param": None, "code": code}}, headers)


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def completion(request: dict[str, Any], texts: list[str], *, usage: dict[str, int] | None = None,
               model: str | None = None) -> dict[str, Any]:
    """A chat.completion object in OpenAI's shape, one choice per text."""
    prompt = "".join(str(m.get("content", "")) for m in request.get("messages", []))
    usage = usage or {"prompt_tokens": _tokens(prompt), "completion_tokens": sum(_tokens(t) for t in texts)}
    usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or request.get("model", "fake"),
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
            for i, text in enumerate(texts)
        ],
        "usage": usage,
        "system_fingerprint": "fp_fake",
    }


# ---------------------------------------------------------------- behaviours


def reply(*texts: str, max_choices: int | None = None, usage: dict[str, int] | None = None,
          model: str | None = None) -> Behaviour:
    """A normal completion: n choices (request's n, capped at max_choices), cycling through texts.

    max_choices=1 plays a server that ignores n (some Ollama/vLLM versions). usage overrides the
    computed one ({"prompt_tokens": P, "completion_tokens": C}); model overrides the echoed name.
    """
    texts = texts or ("ok",)

    def respond(request: dict[str, Any]) -> Response:
        n = int(request.get("n") or 1)
        if max_choices is not None:
            n = min(n, max_choices)
        chosen = list(itertools.islice(itertools.cycle(texts), n))
        return _json(200, completion(request, chosen, usage=usage, model=model))

    return respond


def rate_limited(retry_after_s: float = 0.01) -> Behaviour:
    """429 with Retry-After (the SDK honours it, so a small value keeps tests fast)."""
    return lambda request: _error(
        429, "Rate limit reached for requests", "requests", "rate_limit_exceeded", {"Retry-After": str(retry_after_s)}
    )


def server_error(status: int = 500, retry_after_ms: int | None = 10) -> Behaviour:
    """A 5xx; retry-after-ms (OpenAI's own header) keeps the SDK's backoff short in tests."""
    headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else {}
    message = "The server had an error while processing your request."
    return lambda request: _error(status, message, "server_error", None, headers)


def slow(delay_s: float, then: Behaviour | None = None) -> Behaviour:
    """Answers (with `then`, a normal reply by default) only after delay_s: longer than the client timeout."""
    then = then or reply()

    def respond(request: dict[str, Any]) -> Response:
        response = then(request)
        response.delay_s = delay_s
        return response

    return respond


def malformed(body: str = '{"id": "chatcmpl-fake", "choices": [') -> Behaviour:
    """200 with a body that is not JSON."""
    return lambda request: Response(200, body.encode(), {})


def missing_choices() -> Behaviour:
    """200 with valid JSON that has no choices."""
    return lambda request: _json(200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": request["model"]})


def unauthorized() -> Behaviour:
    """401 as OpenAI sends it for a bad key."""
    return lambda request: _error(
        401,
        "Incorrect API key provided: sk-bad. You can find your API key at https://platform.openai.com/account/api-keys.",
        "invalid_request_error",
        "invalid_api_key",
    )


def model_not_found() -> Behaviour:
    """404 as OpenAI sends it for an unknown model (names the requested model)."""
    return lambda request: _error(
        404, f"The model `{request.get('model')}` does not exist or you do not have access to it.",
        "invalid_request_error", "model_not_found",
    )


class ByCode:
    """A behaviour that answers by the code the prompt shows: the first `# variant: NAME` line of the prompt's
    [CURRENT CODE] block picks NAME's answers ("start" where there is none: the starting kernel, or no code); each of
    the request's n choices takes the next of them, `otherwise` once they are spent. `asked` holds the NAME of every
    request, in order. Give it to FakeOpenAI.serve() (every request) or put it in a script several times.

        by_code = ByCode({"start": [slow, NO_CODE], "slow": [fast]}, otherwise=NO_CODE)
    """

    MARKER = "# variant: "

    def __init__(self, answers: dict[str, list[str]], otherwise: str) -> None:
        self.answers = {k: list(v) for k, v in answers.items()}
        self.otherwise = otherwise
        self.asked: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def key(cls, prompt: str) -> str:
        code = prompt.split("[CURRENT CODE]", 1)[1] if "[CURRENT CODE]" in prompt else ""
        code = code.split("```python\n", 1)[1].split("\n```", 1)[0] if "```python\n" in code else ""
        return next((line.strip()[len(cls.MARKER):].strip() for line in code.splitlines()
                     if line.strip().startswith(cls.MARKER)), "start")

    def __call__(self, request: dict[str, Any]) -> Response:
        prompt = str(request.get("messages", [{}])[-1].get("content", ""))
        key = self.key(prompt)
        with self._lock:
            self.asked.append(key)
            queue = self.answers.get(key, [])
            texts = [queue.pop(0) if queue else self.otherwise for _ in range(int(request.get("n") or 1))]
        return _json(200, completion(request, texts))


def status(code: int, body: object, headers: dict[str, str] | None = None) -> Behaviour:
    """Any status and JSON body."""
    return lambda request: _json(code, body, headers)


# ---------------------------------------------------------------- the server


class FakeOpenAI:
    """The server's state: the script, and what it received (bodies, Authorization headers, paths)."""

    def __init__(self, default: Behaviour | None = None, port: int = 0) -> None:
        self._lock = threading.Lock()
        self._script: list[Behaviour] = []
        self._default = default
        self._stopping = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self.paths: list[str] = []
        self.model_lists = 0  # GET /models (the agent's preflight), answered apart from the script
        self.reject_keys = False  # True: every request is answered 401, as for a revoked key
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True  # a slow answer still sleeping must not block shutdown
        # A short poll interval: shutdown() waits up to one interval, at every test's teardown.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}/v1"

    def script(self, behaviours: list[Behaviour]) -> None:
        """Replace what the next requests get, in order."""
        with self._lock:
            self._script = list(behaviours)

    def serve(self, behaviour: Behaviour) -> None:
        """What every request gets once the script is used up (by default: 400 "script exhausted")."""
        with self._lock:
            self._default = behaviour

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread (the standalone script) until interrupted."""
        try:
            self._server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _next(self, request: dict[str, Any], path: str, authorization: str) -> Response:
        with self._lock:
            self.requests.append(request)
            self.paths.append(path)
            self.authorizations.append(authorization)
            if path != CHAT_PATH:
                return _error(404, f"Invalid URL (POST {path})", "invalid_request_error", None)
            if self._script:
                return self._script.pop(0)(request)
            if self._default is not None:
                return self._default(request)
        return _error(400, "fake server: script exhausted", "invalid_request_error", None, {"x-should-retry": "false"})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                fake.model_lists += 1
                if fake.reject_keys:
                    response = unauthorized()({})
                elif self.path.rstrip("/").endswith("/models"):
                    response = _json(200, {"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]})
                else:
                    response = _error(404, f"Invalid URL (GET {self.path})", "invalid_request_error", None)
                self._send(response)

            def _send(self, response: Response) -> None:
                try:
                    self.send_response(response.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(response.body)))
                    for name, value in response.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(response.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    request = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    request = {"unparsed": raw.decode("utf-8", errors="replace")}
                response = fake._next(request, self.path, self.headers.get("Authorization", ""))
                # Sleep in small steps so that stopping the server does not wait for a slow answer.
                deadline = time.monotonic() + response.delay_s
                while time.monotonic() < deadline and not fake._stopping.is_set():
                    time.sleep(0.01)
                self._send(response)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
                pass  # keep test output clean

        return Handler


def _fixture(fn):  # pytest.fixture where pytest is installed
    return pytest.fixture(fn) if pytest is not None else fn


@_fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started fake server; `.script([...])` what it answers, read `.requests` for what it got."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve hand-written answers as an OpenAI-compatible server.")
    parser.add_argument("answers", nargs="+", type=Path, help="files whose text the completions return, in turn")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    texts = [p.read_text() for p in args.answers]
    cycle = itertools.cycle(texts)
    lock = threading.Lock()

    def next_answers(request: dict[str, Any]) -> Response:
        with lock:
            chosen = [next(cycle) for _ in range(int(request.get("n") or 1))]
        return _json(200, completion(request, chosen))

    server = FakeOpenAI(default=next_answers, port=args.port)
    print(f"fake OpenAI server at {server.base_url} serving {len(texts)} answer(s); Ctrl-C stops it", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
