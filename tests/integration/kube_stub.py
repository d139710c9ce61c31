"""An API-shaped stub of the Kubernetes REST API, for the integration tests.

NOT a cluster: a small local HTTP server that implements only the endpoints Foresight
uses (GET, list by label, POST, PUT, DELETE of ConfigMaps, PodTemplates, Deployments,
PriorityClasses and CapacityBuffer custom objects), keeps objects in memory, adds what
a real server adds (uid, resourceVersion, a defaulted field) and honours
``dryRun=All``. It records every request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from api.consumers.k8s import Manifest

Key = tuple[str, str, str | None, str]
"""(group/version, plural, namespace, name) of a stored object."""


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


@dataclass
class KubeStub:
    """The in-memory state and request log of the stub API server."""

    objects: dict[Key, Manifest] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    serve_capacity_buffers: bool = True
    forbid: bool = False
    version: int = 100
    lock: threading.Lock = field(default_factory=threading.Lock)

    def writes(self) -> list[tuple[str, str, dict[str, list[str]]]]:
        return [(r.method, r.path, r.query) for r in self.requests if r.method != "GET"]

    def stored(self, plural: str) -> dict[str, Manifest]:
        return {key[3]: obj for key, obj in self.objects.items() if key[1] == plural}


def parse(path: str) -> tuple[str, str, str | None, str | None] | None:
    """Split a REST path into (group/version, plural, namespace, name)."""
    parts = path.strip("/").split("/")
    if parts[:2] == ["api", "v1"]:
        gv, rest = "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if len(rest) == 1:
        return gv, rest[0], namespace, None
    if len(rest) == 2:
        return gv, rest[0], namespace, rest[1]
    return None


def make_handler(stub: KubeStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _reply(self, code: int, body: Manifest) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _status(self, code: int, reason: str, message: str) -> None:
            self._reply(
                code,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": reason,
                    "message": message,
                    "code": code,
                },
            )

        def _handle(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            with stub.lock:
                stub.requests.append(Recorded(self.command, url.path, query, body))
                self._route(url.path, query, body)

        def _route(self, path: str, query: dict[str, list[str]], body: Any) -> None:
            parsed = parse(path)
            if parsed is None:
                return self._status(404, "NotFound", f"no route {path}")
            gv, plural, namespace, name = parsed
            if plural == "capacitybuffers" and not stub.serve_capacity_buffers:
                return self._status(
                    404, "NotFound", "the server could not find the requested resource"
                )
            if stub.forbid and self.command != "GET":
                return self._status(403, "Forbidden", f"cannot {self.command} {plural}")
            dry = query.get("dryRun") == ["All"]
            key: Key = (gv, plural, namespace, name or "")
            if self.command == "GET" and name is None:
                return self._list(gv, plural, namespace, query)
            if self.command == "GET":
                found = stub.objects.get(key)
                if found is None:
                    return self._status(404, "NotFound", f'{plural} "{name}" not found')
                return self._reply(200, found)
            if self.command == "POST":
                key = (gv, plural, namespace, body["metadata"]["name"])
                if key in stub.objects:
                    return self._status(409, "AlreadyExists", "already exists")
                return self._reply(201, self._store(key, body, dry))
            if self.command == "PUT":
                current = stub.objects.get(key)
                if current is None:
                    return self._status(404, "NotFound", "not found")
                sent = body["metadata"].get("resourceVersion")
                if sent and sent != current["metadata"]["resourceVersion"]:
                    return self._status(409, "Conflict", "the object has been modified")
                return self._reply(200, self._store(key, body, dry))
            if self.command == "DELETE":
                if key not in stub.objects:
                    return self._status(404, "NotFound", "not found")
                if not dry:
                    del stub.objects[key]
                return self._reply(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
            return self._status(405, "MethodNotAllowed", self.command)

        def _store(self, key: Key, body: Manifest, dry: bool) -> Manifest:
            stub.version += 1
            obj = json.loads(json.dumps(body))
            obj["metadata"] |= {"uid": f"uid-{key[3]}", "resourceVersion": str(stub.version)}
            if obj.get("kind") == "Deployment":
                # What the real API server defaults: a diff must not see it as a change.
                obj["spec"].setdefault("strategy", {"type": "RollingUpdate"})
                obj["status"] = {}
            if not dry:
                stub.objects[key] = obj
            return obj

        def _list(
            self, gv: str, plural: str, namespace: str | None, query: dict[str, list[str]]
        ) -> None:
            wanted = dict(
                pair.split("=", 1)
                for pair in query.get("labelSelector", [""])[0].split(",")
                if pair
            )
            items = [
                obj
                for (g, p, ns, _), obj in stub.objects.items()
                if (g, p) == (gv, plural)
                and (namespace is None or ns == namespace)
                and all(obj["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
            ]
            self._reply(200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items})

        do_GET = do_POST = do_PUT = do_DELETE = _handle  # noqa: N815

    return Handler


@contextmanager
def running_stub() -> Iterator[tuple[KubeStub, str]]:
    """Serve a fresh stub on a loopback port; yield its state and base URL."""
    state = KubeStub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def write_kubeconfig(path: Path, url: str) -> Path:
    """Write a kubeconfig whose current context is the stub at ``url``."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stub", "cluster": {"server": url}}],
                "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "me"}}],
                "current-context": "stub",
                "users": [{"name": "me", "user": {"token": "t"}}],
            }
        )
    )
    return path
