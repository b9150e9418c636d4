"""An S3-compatible server on localhost, for the lessons and the tests: moto's (``moto[s3]`` from
PyPI: a real HTTP server speaking S3's REST protocol, objects kept in its memory), with what each
client process asks of it counted by the server itself: its GETs, those naming a byte range, and
the bytes of the bodies it sends back.

    from ckptlab.s3server import LocalS3
    with LocalS3() as s3:                   # a fresh server on a free port, with one bucket
        os.environ.update(s3.env)           # AWS_ENDPOINT_URL, test credentials: what TensorStore and the tool read
        ...                                 # processes reading s3://ckpt/...
        s3.counts()                         # {pid: {"gets": 12, "ranged": 9, "bytes": 1048576, "puts": 0}}

A request's process is found from its connection, as the kernel sees it: the client's port in the
socket table (``/proc/net/tcp``), then the process holding that socket (``/proc/PID/fd``). So the
counts say which process read what, whatever library it read with; a process that has ended by the
time its first request arrives is counted under pid 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

BUCKET = "ckpt"


# ------------------------------------------------------------------------------ the server's side
def _inode(client_port: int, server_port: int) -> str | None:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, remote = parts[1].rsplit(":", 1)[1], parts[2].rsplit(":", 1)[1]
            if int(local, 16) == client_port and int(remote, 16) == server_port:
                return parts[9]
    return None


def _pid_of(inode: str | None) -> int:
    if inode is None:
        return 0
    target = f"socket:[{inode}]"
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return int(pid)
            except OSError:
                continue
    return 0


class Counting:
    """WSGI middleware: per client process, the requests and the body bytes sent back."""

    def __init__(self, app, port: int):
        self.app, self.port = app, port
        self.lock = threading.Lock()
        self.counts: dict = {}
        self.pids: dict = {}  # (client port, inode) -> pid

    def _pid(self, client_port: int) -> int:
        inode = _inode(client_port, self.port)
        key = (client_port, inode)
        if key not in self.pids:
            self.pids[key] = _pid_of(inode)
        return self.pids[key]

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path in ("/_counts", "/_reset"):
            with self.lock:
                if path == "/_reset":
                    self.counts = {}
                body = json.dumps(self.counts).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        pid = self._pid(int(environ.get("REMOTE_PORT") or 0))
        method, ranged = environ.get("REQUEST_METHOD", ""), "HTTP_RANGE" in environ
        result = self.app(environ, start_response)

        def counted():
            sent = 0
            try:
                for chunk in result:
                    sent += len(chunk)
                    yield chunk
            finally:
                if hasattr(result, "close"):
                    result.close()
                with self.lock:
                    c = self.counts.setdefault(str(pid), {"gets": 0, "ranged": 0, "bytes": 0, "puts": 0})
                    kind = {"GET": "gets", "PUT": "puts"}.get(method, "other")
                    c[kind] = c.get(kind, 0) + 1
                    c["ranged"] += int(method == "GET" and ranged)
                    c["bytes"] += sent if method == "GET" else 0

        return counted()


LIES = ("endless_listing", "giant_record", "trickle", "giant_node", "trickle_node")


class Lying:
    """WSGI middleware: a store that lies, for the tool's hostile tests (the honest server beneath for
    everything else, writes included). ``endless_listing``: every listing page says more follow, with
    new keys, forever; ``giant_record``: a record's GET (any range asked) answered with 64 GiB of
    zeros, sent as fast as they go; ``trickle``: a record's body sent a byte every 2 s. ``giant_node``
    and ``trickle_node`` lie the same way for OCDBT's data files alone (under a ``d/`` folder: its B+tree's
    nodes, where the arrays' headers are kept), honest for every record the tool copies first."""

    def __init__(self, app, lie: str, bucket: str = BUCKET):
        self.app, self.lie, self.bucket = app, lie, bucket

    def __call__(self, environ, start_response):
        from urllib.parse import parse_qs

        method, path = environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "")
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if method != "GET" or not path.startswith(f"/{self.bucket}"):
            return self.app(environ, start_response)
        key = path[len(self.bucket) + 2:]
        if self.lie == "endless_listing" and "list-type" in query:
            return self._listing(query, start_response)
        lie = self.lie
        if lie in ("giant_node", "trickle_node"):
            lie = lie.replace("_node", "_record" if lie == "giant_node" else "") if "/d/" in f"/{key}" else None
        if key and "list-type" not in query and lie == "giant_record":
            start_response("200 OK", [("Content-Length", str(64 * 2**30)), ("Content-Type", "binary/octet-stream")])
            chunk = bytes(2**20)
            return (chunk for _ in range(64 * 2**10))
        if key and "list-type" not in query and lie == "trickle":
            start_response("200 OK", [("Content-Length", "64"), ("Content-Type", "binary/octet-stream")])

            def trickled():
                for _ in range(64):
                    time.sleep(2)
                    yield b"{"
            return trickled()
        return self.app(environ, start_response)

    def _listing(self, query, start_response):
        prefix = query.get("prefix", [""])[0]
        page = int(query.get("continuation-token", ["0"])[0] or 0)
        keys = "".join(f"<Contents><Key>{prefix}k/{page}/{i:0120d}</Key><LastModified>2026-01-01T00:00:00.000Z"
                       "</LastModified><ETag>\"0\"</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>"
                       for i in range(1000))
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{self.bucket}</Name><Prefix>{prefix}</Prefix><KeyCount>1000</KeyCount><MaxKeys>1000</MaxKeys>"
                f"<IsTruncated>true</IsTruncated><NextContinuationToken>{page + 1}</NextContinuationToken>{keys}"
                "</ListBucketResult>").encode()
        start_response("200 OK", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]


def serve(lie: str | None = None) -> None:
    """Run the server on a free port of 127.0.0.1, printing the port, until stdin closes (``lie``:
    one of :data:`LIES`, for a store that lies)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    holder: dict = {}
    server = make_server("127.0.0.1", 0, lambda e, s: holder["app"](e, s), threaded=True,
                         request_handler=MotoRequestHandler)
    app = DomainDispatcherApplication(create_backend_app)
    holder["app"] = Counting(Lying(app, lie) if lie else app, server.server_port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_port, flush=True)
    sys.stdin.read()  # the parent's end: the server stops with it
    server.shutdown()


# ------------------------------------------------------------------------------ the client's side
class LocalS3:
    """A moto S3 server in a fresh process, one bucket made (``BUCKET``), stopped on exit; with ``lie``,
    one that lies so (:class:`Lying`)."""

    def __init__(self, bucket: str = BUCKET, lie: str | None = None):
        if lie is not None and lie not in LIES:
            raise ValueError(f"lie {lie!r}: one of {', '.join(LIES)}")
        self.bucket, self.lie = bucket, lie
        self.process = None

    def __enter__(self) -> LocalS3:
        self.process = subprocess.Popen([sys.executable, "-m", "ckptlab.s3server", *([self.lie] if self.lie else [])],
                                        stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline().strip()
        if not line.isdigit():
            self.__exit__()
            raise RuntimeError("the local S3 server did not start (moto[s3] is in the course's dependencies: "
                               "run make venv)")
        self.url = f"http://127.0.0.1:{line}"
        self._call("PUT", f"/{self.bucket}")
        return self

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            try:
                self.process.stdin.close()
                self.process.wait(10)
            except Exception:
                self.process.kill()
                self.process.wait()
            self.process = None

    @property
    def env(self) -> dict:
        """What a process needs to read from this server: its address, a region and credentials (moto
        accepts any)."""
        return {"AWS_ENDPOINT_URL": self.url, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "ckptlab",
                "AWS_SECRET_ACCESS_KEY": "ckptlab"}

    def _call(self, method: str, path: str) -> bytes:
        for attempt in range(50):
            try:
                return urllib.request.urlopen(urllib.request.Request(self.url + path, method=method), timeout=30).read()
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.1)
        return b""

    def counts(self) -> dict:
        """{pid: {"gets", "ranged", "bytes", "puts"}} since the server started or was last reset."""
        return {int(pid): c for pid, c in json.loads(self._call("GET", "/_counts")).items()}

    def reset(self) -> None:
        self._call("POST", "/_reset")


if __name__ == "__main__":
    serve(sys.argv[1] if len(sys.argv) > 1 else None)
