"""A W&B server that lets an online run start and never takes its data: `finish` waits on it."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from helpers.loopback import free_ports


def _answer(operation: str, variables: dict, url: str) -> dict:
    """GraphQL data for what `wandb.init` needs: the run upserted, its files given upload URLs."""
    if operation == "UpsertBucket":
        project = {"id": "p", "name": variables["project"], "entity": {"id": "e", "name": "me"}}
        run = {"id": "r", "name": variables["name"], "displayName": variables["name"]}
        return {"upsertBucket": {"inserted": True, "bucket": {**run, "project": project}}}
    if operation == "CreateRunFiles":
        files = [{"name": f, "uploadUrl": f"{url}/upload/{f}"} for f in variables["files"]]
        return {"createRunFiles": {"runID": "r", "uploadHeaders": [], "files": files}}
    return {}  # Viewer, RunResumeStatus...: nothing known, which wandb takes as a new run


class _Handler(BaseHTTPRequestHandler):
    server: "StalledWandbServer"

    def do_POST(self) -> None:
        if self.path != "/graphql":
            self._stall()
            return
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = _answer(query.get("operationName"), query.get("variables") or {}, self.server.url)
        body = json.dumps({"data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:
        self._stall()

    def _stall(self) -> None:
        """Accepted, never answered: held until the server closes."""
        self.server.stalled.append(f"{self.command} {self.path}")
        self.server.closing.wait()

    def log_message(self, format: str, *args: object) -> None:
        pass


class StalledWandbServer(ThreadingHTTPServer):
    """On a loopback port: GraphQL answered as `_answer` says; the file stream, file uploads and
    everything else held unanswered. `stalled` lists the requests held ("POST /files/...")."""

    daemon_threads = True

    def __init__(self) -> None:
        (port,) = free_ports(1)
        super().__init__(("127.0.0.1", port), _Handler)
        self.url = f"http://127.0.0.1:{port}"
        self.stalled: list[str] = []
        self.closing = threading.Event()

    def env(self, home: Path) -> dict[str, str]:
        """The environment of an online run that logs here, its W&B files under `home`."""
        return {
            "WANDB_MODE": "online",
            "WANDB_BASE_URL": self.url,
            "WANDB_API_KEY": "0" * 40,  # the length W&B checks; this server reads none
            **{f"WANDB_{d}_DIR": str(home / d.lower()) for d in ("CONFIG", "CACHE", "DATA")},
        }

    def __enter__(self) -> "StalledWandbServer":
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.shutdown()
        self.server_close()
