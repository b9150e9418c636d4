"""Checkpoints in object storage: ``python -m ckptlab inspect|plan|measure|diff s3://bucket/prefix``.

What it takes, with Orbax 0.12.8 and TensorStore 0.1.86 (``tests/tool/test_objectstore.py`` runs both
against an S3-compatible server on localhost):

- **TensorStore speaks S3** (its ``s3`` kvstore driver): a read asks for the byte ranges it needs,
  one range GET each. It takes an S3-compatible store's address only in its spec, never from the
  environment; this module puts there what the AWS SDKs and CLI read: ``AWS_ENDPOINT_URL_S3`` or
  ``AWS_ENDPOINT_URL`` (none: Amazon's own S3), and ``AWS_REGION`` or ``AWS_DEFAULT_REGION``.
  Credentials come from ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` (else TensorStore's
  default chain: ``~/.aws``, the instance's metadata service).
- **Orbax 0.12.8 cannot open an array at an ``s3://`` path**: its TensorStore spec builder
  normalises the path with ``os.path.normpath``, which makes ``s3://b/x`` ``s3:/b/x`` (it mends
  ``gs:/`` alone), then refuses it as not absolute; its records it reads through etils' ``epath``,
  which needs ``s3fs`` for ``s3://``. So this module copies a checkpoint's *records* (every key
  outside its OCDBT data folders ``d/``: ``_METADATA``, ``_sharding``, the OCDBT manifests, a step's
  ``_CHECKPOINT_METADATA``; kilobytes to a few MiB) into a private temporary folder, where Orbax's
  own ``metadata()`` reads them, and reads the B+tree and every value from the store itself through
  TensorStore: a chunk's bytes cross the network only when a command reads them (``diff``,
  ``measure``, which restores each host's shards with TensorStore as Orbax does underneath).
- ``gs://`` and other stores are refused in one sentence saying what is read (no GCS emulator
  that TensorStore accepts could be had here to test it against).

The promise for a checkpoint someone else wrote holds here too (``ckptlab.tool.untrusted``): a key that
would land outside the private folder (``..``, an empty part) is refused before anything is
written, a record larger than ``RECORD_LIMIT`` is refused, and the copy is removed when the process
ends (when it is killed, by the next run: the folder is named by its process). A store that lies (a
listing that never ends, a record sent under a giant length, a body trickled) costs a bounded time and
memory: the listing and the records, then an item's array headers read through the store's OCDBT tree
(``prepare``: an honest listing and records lead to a lying tree as well), are read by a child process,
stopped past ``FETCH_SECONDS`` on the clock (``CKPTLAB_S3_SECONDS``) or ``FETCH_MEMORY``
(``tests/tool/test_objectstore.py``, against ``ckptlab.s3server.Lying``). A checkpoint saved without OCDBT (its chunk sizes are its files' sizes, which TensorStore's
listing does not give) is refused with what to do instead.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# One record (a _METADATA, a manifest) larger than this is refused: Orbax's for 10,000 leaves are a
# few MiB. All the records together are bounded by the same times 4.
RECORD_LIMIT = 256 * 2**20
_RETRIES = {"max_retries": 4, "initial_delay": "0.2s", "max_delay": "2s"}  # an unreachable store: a few seconds
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
SUPPORTED = ("s3",)
_HEADERS = (".zarray", "zarr.json", ".zattrs")


class Unreadable(ValueError):
    """An object-storage path this tool cannot read (the message says what to pass or set)."""


def is_url(path) -> bool:
    return isinstance(path, str) and _URL.match(path) is not None


def endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def s3_spec(bucket: str, prefix: str = "") -> dict:
    """TensorStore's kvstore spec for ``s3://bucket/prefix``, the endpoint and region from the
    environment as the AWS SDKs read them."""
    spec = {"driver": "s3", "bucket": bucket, "path": prefix, "s3_request_retries": dict(_RETRIES)}
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if endpoint():
        spec["endpoint"] = endpoint()
        spec["aws_region"] = region or "us-east-1"  # a local store signs with any region
    elif region:
        spec["aws_region"] = region
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        spec["aws_credentials"] = {"type": "environment"}
    return spec


def parse(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b/")``; other schemes refused in one sentence."""
    scheme, rest = _URL.match(url).groups()
    if scheme.lower() not in SUPPORTED:
        raise Unreadable(f"{url}: {scheme}:// is not read by this tool, which reads checkpoints on local disk and in "
                         "S3-compatible object storage (s3://bucket/path, its address from AWS_ENDPOINT_URL): copy the "
                         f"checkpoint to a local folder (gcloud storage cp -r {url} .) and pass that folder")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not bucket or any(part in ("", ".", "..") for part in prefix.split("/") if prefix):
        raise Unreadable(f"{url} is not a bucket and a path: pass s3://BUCKET/PATH/TO/CHECKPOINT")
    return bucket, prefix + "/" if prefix else ""


@dataclass
class Copy:
    """A checkpoint in object storage, its records copied into ``folder``."""

    url: str
    spec: dict  # the kvstore of the url's prefix
    folder: Path
    prepared: set = field(default_factory=set)  # the items made readable by Orbax (prepare)

    def kvstore(self, local: Path) -> dict:
        rel = Path(local).relative_to(self.folder).as_posix()
        return {**self.spec, "path": self.spec["path"] + ("" if rel == "." else rel + "/")}


_COPIES: dict[str, Copy] = {}


def forget() -> None:
    """Remove every copy of records this process made (it is done when the process ends, too)."""
    for copy in _COPIES.values():
        shutil.rmtree(copy.folder.parent, ignore_errors=True)
    _COPIES.clear()


atexit.register(forget)


def _records(keys: list[str]) -> list[str]:
    """The keys to copy: all but OCDBT's data files (under a ``d/`` folder) and a zarr array's chunks
    (in a folder holding a zarr header)."""
    arrays = {k.rpartition("/")[0] for k in keys if k.rpartition("/")[2] in _HEADERS}
    out = []
    for key in keys:
        parts = key.split("/")
        if "d" in parts[:-1]:
            continue
        if parts[-1] not in _HEADERS and any("/".join(parts[:i]) in arrays for i in range(1, len(parts))):
            continue
        out.append(key)
    return out


def _safe(key: str) -> bool:
    parts = key.split("/")
    return bool(key) and not key.startswith("/") and all(p not in ("", ".", "..") for p in parts) and "\\" not in key


def _larger(store, key: str, limit: int) -> bool:
    """Whether ``key`` holds more than ``limit`` bytes, asked with a one-byte range GET past them
    (a record is read whole only once known to be small: a declared size is never trusted)."""
    try:
        return len(store.read(key, byte_range=slice(limit, limit + 1)).result().value) == 1
    except ValueError as exc:  # OUT_OF_RANGE: the object ends before
        if "OUT_OF_RANGE" in str(exc):
            return False
        raise


# The store is anyone's, and may lie: a listing that never ends, a record sent under a giant length
# whatever range was asked, a body trickled a byte at a time. So the listing and the records are read
# in a child process, given FETCH_SECONDS on the clock in all (CKPTLAB_S3_SECONDS sets another) and
# FETCH_MEMORY: past either it is killed, and the tool says why, having held nothing of it itself.
FETCH_SECONDS = 120.0  # an honest checkpoint's records: seconds (5 s for the course's, over loopback)
FETCH_MEMORY = 1024 * 2**20  # the child's resident memory at most (the course's records: about 150 MiB with TensorStore)
SECONDS_VARIABLE = "CKPTLAB_S3_SECONDS"
_PREFIX = "ckptlab-s3-"  # a copy's folder: ckptlab-s3-<the pid of the process it is for>-<random>


def _clean_stale() -> None:
    """Remove the copies of processes that have ended without removing theirs (killed: no atexit ran)."""
    for path in Path(tempfile.gettempdir()).glob(_PREFIX + "*"):
        pid = path.name[len(_PREFIX):].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def _fetch_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get(SECONDS_VARIABLE, FETCH_SECONDS)))
    except ValueError:
        return FETCH_SECONDS


def fetch(url: str) -> Copy:
    """The records of the checkpoint at ``url`` copied into a private temporary folder (once per
    process and url), by a child process bounded in time and memory; what to fix when the store
    cannot be listed, or lies."""
    if url in _COPIES:
        return _COPIES[url]
    bucket, prefix = parse(url)
    spec = s3_spec(bucket, prefix)
    where = f"the store at {endpoint()}" if endpoint() else "Amazon S3 (AWS_ENDPOINT_URL is not set)"
    _clean_stale()
    top = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
    folder = top / (prefix.rstrip("/").rpartition("/")[2] or bucket)
    folder.mkdir()
    try:
        said = _in_child({"url": url, "spec": spec, "where": where, "folder": str(folder),
                          "record_limit": RECORD_LIMIT})
        if "error" in said:
            raise Unreadable(said["error"])
    except BaseException:  # a copy cut short is removed, never kept for the next command to read
        shutil.rmtree(top, ignore_errors=True)
        raise
    copy = _COPIES[url] = Copy(url, spec, folder)
    return copy


def _in_child(job: dict, what: str = "its listing and records") -> dict:
    """Run :func:`_copy_records` (or, for a job of kind ``headers``, :func:`_copy_headers`) on ``job`` in a
    child process, watched: killed past the fetch's seconds or memory, which the answer then says
    (``what`` it was reading)."""
    import json
    import subprocess
    import sys
    import time

    from ckptlab.memory import status_bytes

    seconds, url = _fetch_seconds(), job["url"]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-c", "from ckptlab.tool.objectstore import _child; _child()"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
        end, why = time.monotonic() + seconds, None
        try:
            while proc.poll() is None:
                held = status_bytes("VmRSS", proc.pid) or 0  # (0 once gone)
                if held > FETCH_MEMORY:
                    why = (f"{url}: reading {what} took more than {FETCH_MEMORY >> 20} MiB of memory, "
                           "and was stopped: not a checkpoint Orbax wrote (a listing that never ends, or a record "
                           "larger than it was asked for). Check the store, or pass another checkpoint")
                elif time.monotonic() > end:
                    why = (f"{url}: the store did not give {what} within {seconds:.0f} s, and the "
                           "read was stopped (a listing that never ends, or a body sent slowly): check the store "
                           f"({job['where']}), or set {SECONDS_VARIABLE} to give a slow one longer")
                if why:
                    proc.kill()
                    break
                time.sleep(0.02)  # (a store sending fast grows it by about 15 MiB in that time)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        out = proc.stdout.read()
        proc.stdout.close()
        if why:
            return {"error": why}
        try:
            return json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            err.seek(0)
            tail = err.read()[-300:].decode("utf-8", "replace").strip().splitlines()
            return {"error": f"{url}: {what} could not be read ({tail[-1] if tail else 'the reader ended'})"}


def _child() -> None:
    """The child's side: the job from stdin, the answer (``{}`` or ``{"error": ...}``) on stdout."""
    import json
    import sys

    job = json.loads(sys.stdin.read())
    try:
        (_copy_headers if job.get("kind") == "headers" else _copy_records)(job)
        print(json.dumps({}))
    except Unreadable as exc:
        print(json.dumps({"error": str(exc)}))


def _copy_records(job: dict) -> None:
    """List the store at the job's spec and copy its records into its folder (the child's work)."""
    import tensorstore as ts

    url, where, folder, limit = job["url"], job["where"], Path(job["folder"]), int(job["record_limit"])
    try:
        store = ts.KvStore.open(job["spec"]).result()
        keys = sorted(k.decode("utf-8", "replace") for k in store.list().result())
    except ValueError as exc:
        raise Unreadable(f"{url} cannot be listed in {where} ({str(exc).splitlines()[0][:200]}): check "
                         "AWS_ENDPOINT_URL (an S3-compatible store's address), the bucket's name, and the credentials "
                         "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)") from None
    if not keys:
        raise Unreadable(f"{url} holds nothing in {where} (no key under that path): pass the folder an Orbax save "
                         "wrote, or a CheckpointManager's root")
    unsafe = [k for k in keys if not _safe(k)]
    if unsafe:
        raise Unreadable(f"{url} holds a key that names no place inside it ({unsafe[0]!r}): this tool writes and reads "
                         "nothing outside the checkpoint it is given. Pass another checkpoint")
    total = 0
    for key in _records(keys):
        big = _larger(store, key, limit)
        # (a store that then sends more than that, whatever it said, is stopped by the parent: its memory)
        value = b"" if big else store.read(key).result().value
        total += len(value)
        if big or len(value) > limit or total > 4 * limit:
            raise Unreadable(f"{url}/{key} is a record larger than this tool reads ({limit // 2**20} MiB "
                             "each, four times that in all): not a checkpoint Orbax wrote. Pass another checkpoint")
        target = folder.joinpath(*key.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(value)
    for key in keys:  # the data folders, left empty, so the tree looks as Orbax left it
        parts = key.split("/")[:-1]
        if "d" in parts:
            last = len(parts) - 1 - parts[::-1].index("d")
            folder.joinpath(*parts[: last + 1]).mkdir(parents=True, exist_ok=True)


def prepare(item) -> None:
    """Make the copied pytree folder ``item`` readable by Orbax's ``metadata()``, once, before it is
    read (nothing for a local folder): its copied OCDBT manifest replaced by a local database of its
    arrays' zarr headers alone (``.zarray``, ``zarr.json``: kept inline in the B+tree's nodes, a few
    hundred bytes each), read from the store, where Orbax reads each array's shape, dtype and chunk
    shape. Every chunk stays in the store. Done for the item read alone (a manager's root holds many)."""

    copy, item = copy_of(item), Path(item)
    if copy is None or item in copy.prepared or not (item / "manifest.ocdbt").is_file():
        return
    copy.prepared.add(item)
    # (read by a watched child, as the records are: the store's B+tree nodes may lie as its records may)
    where = f"the store at {endpoint()}" if endpoint() else "Amazon S3 (AWS_ENDPOINT_URL is not set)"
    said = _in_child({"kind": "headers", "url": copy.url, "base": copy.kvstore(item), "where": where,
                      "folder": str(item), "record_limit": RECORD_LIMIT}, "its arrays' headers")
    if "error" in said:
        raise Unreadable(said["error"])


def _copy_headers(job: dict) -> None:
    """The child's work for :func:`prepare`: the item's arrays' zarr headers read from the store's OCDBT
    database into a local one, in place of its copied manifest."""
    import tensorstore as ts

    url, item, limit = job["url"], Path(job["folder"]), int(job["record_limit"])
    remote = ts.KvStore.open({"driver": "ocdbt", "base": job["base"]}).result()
    found = [k for k in remote.list().result() if k.decode("utf-8", "replace").rpartition("/")[2] in _HEADERS]
    (item / "manifest.ocdbt").unlink()
    here = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{item}/"}).result()
    total = 0
    with ts.Transaction() as txn:
        for key in found:
            value = remote.read(key).result().value
            total += len(value)
            if len(value) > limit or total > 4 * limit:
                raise Unreadable(f"{url}: an array's header {key.decode(errors='replace')!r} is larger than this "
                                 "tool reads: not a checkpoint Orbax wrote. Pass another checkpoint")
            here.with_transaction(txn)[key] = value


def local(path):
    """``path`` as the tool reads it: a local path as given; an ``s3://`` url as its records' copy."""
    return fetch(path).folder if is_url(path) else path


def copy_of(folder) -> Copy | None:
    """The copy ``folder`` lies in, if it is one of an object store's checkpoint."""
    folder = Path(folder)
    for copy in _COPIES.values():
        if folder == copy.folder or folder.is_relative_to(copy.folder):
            return copy
    return None


def kvstore(folder) -> dict:
    """TensorStore's kvstore for the checkpoint folder ``folder`` (a local one, or a copy's: the
    object store's prefix for it)."""
    copy = copy_of(folder)
    return copy.kvstore(folder) if copy is not None else {"driver": "file", "path": f"{folder}/"}


def shown(text: str) -> str:
    """``text`` with each copy's folder written as the url it came from."""
    for copy in _COPIES.values():
        text = text.replace(str(copy.folder), copy.url.rstrip("/"))
    return text


def s3_bytes_read() -> int:
    """The bytes TensorStore has read from S3 in this process (its own counter: the bodies of its GETs)."""
    import tensorstore as ts

    found = ts.experimental_collect_matching_metrics("/tensorstore/kvstore/s3/bytes_read")
    return int(sum(v.get("value", 0) for m in found for v in m.get("values", [])))


def upload(folder, url: str) -> int:
    """Copy the checkpoint in local ``folder`` byte for byte to ``url`` (an ``s3://`` prefix), as
    ``aws s3 cp --recursive`` would (Orbax 0.12.8 cannot save to ``s3://``: see the module's text).
    Returns the bytes written."""
    import tensorstore as ts

    bucket, prefix = parse(url)
    source = ts.KvStore.open({"driver": "file", "path": f"{os.path.abspath(folder)}/"}).result()
    target = ts.KvStore.open(s3_spec(bucket, prefix)).result()
    written = 0
    for key in sorted(source.list().result()):
        value = source.read(key).result().value
        target.write(key, value).result()
        written += len(value)
    return written


__all__ = ["Copy", "RECORD_LIMIT", "SUPPORTED", "Unreadable", "copy_of", "endpoint", "fetch", "forget", "is_url", "kvstore",
           "local", "parse", "prepare", "s3_bytes_read", "s3_spec", "shown", "upload"]
