"""
Test helpers for model downloads: a small HTTP server on 127.0.0.1 that serves the published
models' layout from memory (and misbehaves on request), and where the golden fixture is.
"""
import hashlib
import http.server
import os
import threading
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from elmo_plugin.model_files.catalogue import PublishedModel
from tests.helpers import FIXTURES

# Ways a served file can go wrong (`ModelServer.misbehave`).
NOT_FOUND = "404"
DROPPED = "dropped"  # Content-Length of the whole file, half of it sent, then the connection closed
HTML_PAGE = "html"  # 200 with an HTML page instead of the file (a captive portal, an error page)

HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Log in</body></html>\n"


def golden_fixtures_dir() -> Path:
    """
    AllenNLP's golden ELMo fixture (options.json, lm_weights.hdf5, lm_embeddings_*.hdf5,
    sentences.json), in the repository: `tests.helpers.FIXTURES`.
    """
    return FIXTURES


class ModelServer:
    """
    Serves ``files`` (URL path -> bytes) at `url` from a daemon thread, with ETags as S3 sends
    them; ``misbehave`` makes a path answer with `NOT_FOUND`, `DROPPED` or `HTML_PAGE`. Every
    request is recorded in ``requests`` as ``(method, path)``. Use it as a context manager, or
    call `stop` (the port then refuses connections, like a machine that is offline).
    """

    def __init__(self) -> None:
        self.files: Dict[str, bytes] = {}
        self.misbehave: Dict[str, str] = {}
        self.requests: List[Tuple[str, str]] = []
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread: Optional[threading.Thread] = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def serve_published(self, model: PublishedModel, fixtures: Path) -> Tuple[str, str]:
        """Serves the fixture's options and weights as ``model``'s files; returns their URLs."""
        options_url, weights_url = model.options_url(self.url), model.weights_url(self.url)
        self.files[self.path_of(options_url)] = (fixtures / "options.json").read_bytes()
        self.files[self.path_of(weights_url)] = (fixtures / "lm_weights.hdf5").read_bytes()
        return options_url, weights_url

    def path_of(self, url: str) -> str:
        assert url.startswith(self.url), url
        return url[len(self.url) :]

    def gets(self) -> List[str]:
        return [path for method, path in self.requests if method == "GET"]

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> "ModelServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _handler_class(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 10  # seconds per socket operation: a stuck client cannot hang the tests

            def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
                self._answer(send_body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(send_body=True)

            def _answer(self, send_body: bool) -> None:
                server.requests.append((self.command, self.path))
                behaviour = server.misbehave.get(self.path)
                body = server.files.get(self.path)
                if body is None or behaviour == NOT_FOUND:
                    self.send_error(404)
                    return
                content_type = "application/octet-stream"
                if behaviour == HTML_PAGE:
                    body, content_type = HTML, "text/html"
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", f'"{hashlib.md5(body).hexdigest()}"')
                self.end_headers()
                if not send_body:
                    return
                if behaviour == DROPPED:
                    # Promise the whole file, send half, hang up.
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass  # no access log on stderr

        return Handler


def cache_entries(cache_dir: Path) -> List[str]:
    """The files of a cached_path cache directory (entries, .json metadata, .lock, .tmp)."""
    return sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []
