"""A small stand-in for the Hugging Face Hub on 127.0.0.1, for the real huggingface_hub client.

It serves `/{repo}/resolve/{revision}/{file}` for HEAD and GET, honours `Range: bytes=a-b`
(206 + Content-Range), and fails the way the Hub does: the error kind travels in the
`X-Error-Code` header that huggingface_hub's hf_raise_for_status reads (RepoNotFound → 401,
GatedRepo → 401, RevisionNotFound → 404, EntryNotFound → 404). Every request is recorded so
tests can assert that a cached plan makes none.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def safetensors_header_only(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A safetensors file with a real header and no tensor data (offsets as if it had some)."""
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "I64": 8, "I32": 4, "I8": 1,
             "U8": 1}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    return struct.pack("<Q", len(blob)) + blob


@dataclass
class FakeRepo:
    files: dict[str, dict[str, bytes]]  # revision → filename → content
    gated: bool = False

    def commit(self, revision: str) -> str:
        return hashlib.sha1(f"{id(self)}{revision}".encode()).hexdigest()


@dataclass
class FakeHub:
    repos: dict[str, FakeRepo] = field(default_factory=dict)
    token: str = "hf_goodtoken"
    delay_s: float = 0.0
    requests: list[tuple[str, str]] = field(default_factory=list)

    def start(self) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep pytest output clean
                pass

            def do_HEAD(self) -> None:  # noqa: N802 - http.server naming
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

            def _send(
                self, status: int, headers: dict[str, str], payload: bytes, body: bool
            ) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def _error(self, status: int, code: str, message: str, body: bool,
                       extra: dict[str, str] | None = None) -> None:
                self._send(status, {"X-Error-Code": code, "X-Error-Message": message,
                                    **(extra or {})}, json.dumps({"error": message}).encode(), body)

            def _answer(self, body: bool) -> None:
                hub.requests.append((self.command, self.path))
                if hub.delay_s:
                    time.sleep(hub.delay_s)
                m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", self.path.split("?")[0])
                if not m:
                    return self._error(404, "RepoNotFound", "Repository not found", body)
                repo_id, revision, filename = m.groups()
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return self._error(401, "RepoNotFound", "Repository not found", body)
                if repo.gated and self.headers.get("authorization") != f"Bearer {hub.token}":
                    return self._error(
                        401, "GatedRepo", f"Access to model {repo_id} is restricted.", body
                    )
                if revision not in repo.files:
                    return self._error(404, "RevisionNotFound", "Invalid rev id: " + revision, body)
                commit = repo.commit(revision)
                content = repo.files[revision].get(filename)
                if content is None:
                    return self._error(404, "EntryNotFound", "Entry not found", body,
                                       {"X-Repo-Commit": commit})
                headers = {"X-Repo-Commit": commit,
                           "ETag": '"' + hashlib.sha1(content).hexdigest() + '"',
                           "Accept-Ranges": "bytes"}
                rng = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("range") or "")
                if rng:
                    start, end = int(rng.group(1)), min(int(rng.group(2)), len(content) - 1)
                    part = content[start:end + 1]
                    headers["Content-Range"] = (
                        f"bytes {start}-{start + len(part) - 1}/{len(content)}"
                    )
                    return self._send(206, headers, part, body)
                return self._send(200, headers, content, body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )  # shutdown() waits up to one poll
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
