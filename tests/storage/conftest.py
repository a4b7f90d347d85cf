"""Fixtures for the store tests: a factory for every store kind, and an S3-compatible server
(moto in server mode) on loopback for the whole session."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from chunkstore.storage import (
    DirectoryStore,
    FSStore,
    LMDBStore,
    LRUStoreCache,
    MemoryStore,
    NestedDirectoryStore,
    SQLiteStore,
    ZipStore,
)

FIXTURES = Path(os.environ.get("CHUNKSTORE_FIXTURES", "/work/shared/fixtures"))

S3_BUCKET = "chunkstore-test"
S3_KEY = "testing"
S3_SECRET = "testing"


@dataclass
class S3Server:
    endpoint: str
    bucket: str

    @property
    def storage_options(self) -> dict:
        return {
            "key": S3_KEY,
            "secret": S3_SECRET,
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"},
            # fail fast instead of retrying for minutes in the error tests
            "config_kwargs": {"retries": {"max_attempts": 1}},
        }

    def url(self, name: str | None = None) -> str:
        return f"s3://{self.bucket}/{name or uuid.uuid4().hex}"

    def set_auth(self, enabled: bool) -> None:
        """Turn moto's request authentication on (every request must be signed by a known
        IAM user, so our dummy credentials get 403) or off, through its HTTP API."""
        import urllib.request

        req = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=b"0" if enabled else b"inf",
            method="POST",
            headers={"Content-Type": "text/plain"},  # a form type would hide the body
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible HTTP server (moto) on 127.0.0.1, with one bucket."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://127.0.0.1:{port}"
        import boto3

        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_SECRET,
            region_name="us-east-1",
        ).create_bucket(Bucket=S3_BUCKET)
        yield S3Server(endpoint, S3_BUCKET)
    finally:
        server.stop()


# -----------------------------------------------------------------------------------------
# store factories
# -----------------------------------------------------------------------------------------


@dataclass
class Kind:
    """How to make (and reopen) one kind of store for the contract suite."""

    name: str
    make: Callable[..., object]  # make(mode="a") -> store; same location every call
    persistent: bool  # data survives close() + make() again
    root: Path | None  # directory the store lives in (for "nothing outside root" checks)


ALL_KINDS = [
    "memory",
    "directory",
    "nested",
    "zip",
    "sqlite",
    "lmdb",
    "fs_file",
    "fs_memory",
    "fs_s3",
    "lru_memory",
    "obstore_local",
]
# Kinds whose data outlives the store object; "pickled to another process" also needs the
# data outside this process (memory:// is per-process).
PERSISTENT_KINDS = [k for k in ALL_KINDS if k not in ("memory", "lru_memory")]
CROSS_PROCESS_KINDS = [k for k in PERSISTENT_KINDS if k != "fs_memory"]


def make_kind(name: str, tmp_path: Path, request) -> Kind:
    base = tmp_path / "store_area"
    base.mkdir(exist_ok=True)
    if name == "memory":
        return Kind(name, lambda mode="a": MemoryStore(mode=mode), False, None)
    if name == "directory":
        return Kind(name, lambda mode="a": DirectoryStore(base / "d", mode=mode), True, base)
    if name == "nested":
        return Kind(
            name, lambda mode="a": NestedDirectoryStore(base / "n", mode=mode), True, base
        )
    if name == "zip":
        return Kind(name, lambda mode="a": ZipStore(base / "s.zip", mode=mode), True, base)
    if name == "sqlite":
        return Kind(name, lambda mode="a": SQLiteStore(base / "s.sqlite", mode=mode), True, base)
    if name == "lmdb":
        return Kind(
            name,
            lambda mode="a": LMDBStore(base / "s.lmdb", mode=mode, map_size=1 << 20),
            True,
            base,
        )
    if name == "fs_file":
        return Kind(name, lambda mode="a": FSStore(f"file://{base}/f", mode=mode), True, base)
    if name == "fs_memory":
        url = f"memory://{uuid.uuid4().hex}"

        def cleanup():
            import fsspec

            fs = fsspec.filesystem("memory")
            if fs.exists(url):
                fs.rm(url, recursive=True)

        request.addfinalizer(cleanup)
        return Kind(name, lambda mode="a": FSStore(url, mode=mode), True, None)
    if name == "fs_s3":
        s3 = request.getfixturevalue("s3_server")
        url = s3.url()
        return Kind(
            name,
            lambda mode="a": FSStore(url, mode=mode, storage_options=s3.storage_options),
            True,
            None,
        )
    if name == "lru_memory":
        return Kind(
            name,
            lambda mode="a": LRUStoreCache(MemoryStore(mode=mode), max_size=1 << 20),
            False,
            None,
        )
    if name == "obstore_local":
        obstore = pytest.importorskip("obstore.store")
        from chunkstore.storage import ObjectStore
        root = base / "o"
        root.mkdir(exist_ok=True)
        return Kind(name, lambda mode="a": ObjectStore(obstore.LocalStore(str(root)),
                                                       read_only=mode == "r"), True, base)
    raise ValueError(name)


@pytest.fixture(params=ALL_KINDS)
def kind(request, tmp_path) -> Kind:
    return make_kind(request.param, tmp_path, request)


@pytest.fixture
def store(kind):
    s = kind.make()
    yield s
    close = getattr(s, "close", None)
    if close is not None:
        close()


def copy_fixture(name: str, tmp_path: Path) -> Path:
    """Copy a v2 fixture case folder to tmp_path (the originals must never be written)."""
    src = FIXTURES / "v2" / name
    dst = tmp_path / name
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


@pytest.fixture(params=PERSISTENT_KINDS)
def persistent_kind(request, tmp_path) -> Kind:
    return make_kind(request.param, tmp_path, request)


@pytest.fixture(params=CROSS_PROCESS_KINDS)
def cross_process_kind(request, tmp_path) -> Kind:
    return make_kind(request.param, tmp_path, request)
