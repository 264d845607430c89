"""The embedded SmolLM2 served over HTTP: the default upstream of the LLM proxy.

`EmbeddedServer` starts llama-cpp-python's own OpenAI-compatible server (``python -m
llama_cpp.server``, the ``llm`` extra) on a free 127.0.0.1 port with the model of
`polar_bench.llm.default_model_path`, waits (bounded) until it answers ``GET /v1/models``, and stops
it (its whole process group) on exit. Its answers carry ``usage`` (the proxy counts tokens from it)
and honour ``seed``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from ..errors import LLMError
from .embedded import _default_threads, default_model_path

__all__ = ["EmbeddedServer", "MODEL_ALIAS"]

MODEL_ALIAS = "smollm2"
READY_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedServer:
    """``with EmbeddedServer() as url:`` the base URL (``http://127.0.0.1:PORT/v1``) of the embedded model.
    ``n_threads``: llama.cpp threads (default: ``POLAR_BENCH_LLM_THREADS`` or 1)."""

    def __init__(self, *, n_threads: int | None = None, n_ctx: int = 2048, ready_timeout: float = READY_TIMEOUT_S):
        self.n_threads = n_threads or _default_threads()
        self.n_ctx = n_ctx
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> str:
        port = _free_port()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path()),
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(self.n_threads),
               "--n_threads_batch", str(self.n_threads), "--n_ctx", str(self.n_ctx), "--model_alias", MODEL_ALIAS]
        log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + self.ready_timeout
        while True:
            if self.proc.poll() is not None:
                log.seek(0)
                tail = log.read()[-1500:].decode("utf-8", "replace")
                raise LLMError(f"the embedded LLM server (llama_cpp.server) exited with {self.proc.returncode}; "
                               f"install its extra with pip install \"polar_bench[llm]\":\n{tail}")
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                    if r.status == 200:
                        return self.url
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise LLMError(f"the embedded LLM server did not answer within {self.ready_timeout:g} s")
            time.sleep(0.2)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
