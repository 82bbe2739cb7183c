"""A loopback stand-in for the Hugging Face hub: the part of its HTTP API that
``huggingface_hub.snapshot_download`` uses (model info at a revision, file resolve with etag and commit
headers, ranged GETs), serving tiny saved twins from memory. Binds 127.0.0.1 only.

Error behaviour follows the hub: unknown repo -> 404 + ``X-Error-Code: RepoNotFound``; unknown revision ->
404 + ``X-Error-Code: RevisionNotFound``. Files listed in ``cut`` are sent with their full Content-Length
but only half the bytes before the connection closes (a download cut off half-way).
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


class Hub:
    def __init__(self):
        self.repos: dict[str, dict] = {}  # repo -> {"refs": {name: sha}, "commits": {sha: {file: bytes}}}
        self.cut: set[tuple[str, str]] = set()
        self.requests: list[str] = []

    def add(self, repo: str, folder: Path, sha: str, ref: str = "main") -> None:
        files = {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()}
        r = self.repos.setdefault(repo, {"refs": {}, "commits": {}})
        r["commits"][sha] = files
        r["refs"][ref] = sha

    def resolve(self, repo: str, rev: str):
        r = self.repos.get(repo)
        if r is None:
            return None, "RepoNotFound"
        sha = r["refs"].get(rev, rev)
        if sha not in r["commits"]:
            return None, "RevisionNotFound"
        return sha, None

    def serve(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _err(self, code):
                self.send_response(404)
                self.send_header("X-Error-Code", code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _json(self, obj, head: bool):
                body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _route(self, head: bool):
                path = unquote(self.path.split("?")[0])
                hub.requests.append(f"{self.command} {path}")
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"] and len(parts) > 5 and parts[4] == "tree":
                    repo, rev = "/".join(parts[2:4]), parts[5]
                    sha, err = hub.resolve(repo, rev)
                    if err:
                        return self._err(err)
                    entries = []
                    for f, data in sorted(hub.repos[repo]["commits"][sha].items()):
                        e = {"type": "file", "path": f, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                        if f.endswith(".safetensors"):
                            e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                        entries.append(e)
                    return self._json(entries, head)
                if parts[:2] == ["api", "models"]:
                    repo = "/".join(parts[2:4])
                    rev = parts[5] if len(parts) > 5 and parts[4] == "revision" else "main"
                    sha, err = hub.resolve(repo, rev)
                    if err:
                        return self._err(err)
                    body = json.dumps({"id": repo, "modelId": repo, "sha": sha, "private": False,
                                       "siblings": [{"rfilename": f} for f in sorted(hub.repos[repo]["commits"][sha])]
                                       }).encode()
                    return self._json(body, head)
                if len(parts) >= 5 and parts[2] == "resolve":
                    repo, rev, fname = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
                    sha, err = hub.resolve(repo, rev)
                    if err:
                        return self._err(err)
                    data = hub.repos[repo]["commits"][sha].get(fname)
                    if data is None:
                        return self._err("EntryNotFound")
                    start = 0
                    rng = self.headers.get("Range")
                    if rng and rng.startswith("bytes="):
                        start = int(rng[6:].split("-")[0] or 0)
                    chunk = data[start:]
                    self.send_response(206 if start else 200)
                    self.send_header("X-Repo-Commit", sha)
                    self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
                    self.send_header("Content-Length", str(len(chunk)))
                    if start:
                        self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                    self.end_headers()
                    if head:
                        return
                    if (repo, fname) in hub.cut:
                        self.wfile.write(chunk[: len(chunk) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    self.wfile.write(chunk)
                    return
                self._err("EntryNotFound")

            def do_GET(self):
                self._route(False)

            def do_HEAD(self):
                self._route(True)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        t = threading.Thread(target=server.serve_forever, daemon=True)
        t.start()
        return server, f"http://127.0.0.1:{server.server_address[1]}"
