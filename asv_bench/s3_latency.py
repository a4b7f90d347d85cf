#!/usr/bin/env python
"""S3 at cloud latency: chunkstore against zarr-python 3 and tensorstore.

An S3-compatible server (moto, in its own process) on loopback, behind a TCP proxy (also its
own process) that holds every block of bytes for a one-way delay of RTT/2 in each direction,
so round trips cost what they cost in the cloud (the TCP handshake is not delayed: moto
closes each connection after one response, where S3 keeps connections alive). The workloads run on a 2048x2048 float32 Zarr v2 array in 256x256 chunks
(64 chunks, Blosc lz4 clevel 5, byte shuffle), written once without the proxy; each library
runs in its own process; reads are checked against the data. The server's request log is
counted around every workload, and the requests per run are printed beside the times.

    python asv_bench/s3_latency.py                       # 0 and 20 ms RTT, all libraries
    python asv_bench/s3_latency.py --rtt 20 --repeat 3
    python asv_bench/s3_latency.py --before /path/to/old/checkout   # adds "chunkstore before"
    python asv_bench/s3_latency.py --rtt 20 --io-concurrency 8 16 32 128  # the default's basis

Times are the median of --repeat runs, in milliseconds (with --rounds, the median over the
rounds of those medians, the libraries' processes interleaved). Every library reuses one client
(connection pool) across the runs, as a long-lived program does; "fresh open" means a new
array object (and for chunkstore a new FSStore), not a new process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# the chunkstore the workers import: ci/bench.sh's per-commit build (CHUNKSTORE_BENCH_SRC),
# else this checkout
ROOT = os.environ.get("CHUNKSTORE_BENCH_SRC") or os.path.dirname(HERE)
BUCKET = "latency-bench"
KEY = SECRET = "testing"
SHAPE, CHUNKS = (2048, 2048), (256, 256)
N_GROUP = 20

WORKLOADS = [
    ("open", "open an array"),
    ("read_all", "read all 64 chunks"),
    ("window", "read a 512² window (9 chunks)"),
    ("elem_fresh", "one element, fresh open"),
    ("elem_open", "one element, open array"),
    ("consolidated", f"open_consolidated + list {N_GROUP} arrays"),
    ("write", "write 64 chunks"),
]
REQUEST_RE = re.compile(r"\"(?:\x1b\[[0-9;]*m)?(GET|PUT|HEAD|POST|DELETE) ")


# ---------------------------------------------------------------------------------- helpers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0) -> None:
    t = time.time()
    while time.time() - t < timeout:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def make_data():
    import numpy as np

    y, x = np.mgrid[0 : SHAPE[0], 0 : SHAPE[1]].astype("f4")
    rng = np.random.default_rng(0)
    a = np.sin(x / 97) * np.cos(y / 61) * 100 + rng.standard_normal(SHAPE, dtype="f4")
    return np.round(a, 2).astype("f4")


def storage_options(endpoint: str) -> dict:
    return {"key": KEY, "secret": SECRET,
            "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}


# ---------------------------------------------------------------------------------- proxy
async def _pump(reader, writer, delay):
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                try:
                    writer.write_eof()
                except OSError:
                    pass
                return
            writer.write(data)
            await writer.drain()

    task = asyncio.create_task(send())
    try:
        while True:
            data = await reader.read(1 << 16)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                break
        await task
    except (ConnectionError, OSError):
        task.cancel()


async def _serve_proxy(listen: int, target: int, delay: float):
    async def handle(cr, cw):
        try:
            sr, sw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            cw.close()
            return
        sock = cw.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sw.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # No round trip for the TCP handshake: moto's server (werkzeug) closes every
        # connection after one response, where S3 keeps them alive, so a client pays the
        # handshake once per connection in the cloud but once per request here.
        await asyncio.gather(_pump(cr, sw, delay), _pump(sr, cw, delay),
                             return_exceptions=True)
        for w in (cw, sw):
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=1024)
    async with server:
        await server.serve_forever()


def run_proxy(listen: int, target: int, rtt_ms: float) -> None:
    asyncio.run(_serve_proxy(listen, target, rtt_ms / 2000.0))


# ---------------------------------------------------------------------------------- workers
class Log:
    """Counts the requests in the server's log file."""

    def __init__(self, path):
        self.path = path

    def count(self):
        time.sleep(0.01)  # the server logs right after answering
        with open(self.path, errors="replace") as f:
            return [m.group(1) for m in REQUEST_RE.finditer(f.read())]


def _fmt_requests(before, after):
    new = after[len(before):]
    by = {}
    for m in new:
        by[m] = by.get(m, 0) + 1
    return len(new), by


def _chunkstore_workloads(store, out, threads):
    """The workloads of chunkstore over store(path, mode) (writing into path out)."""
    import chunkstore as cs

    if threads:
        cs.config.set(threads=threads)

    def opened():
        return cs.open_array(store("src"), mode="r")

    def consolidated():
        g = cs.open_consolidated(store("group"), mode="r")
        return sorted(name for name, _ in g.arrays())

    def writer():
        import numcodecs
        return cs.open_array(store(out, "a"), mode="w", shape=SHAPE, chunks=CHUNKS,
                             dtype="f4", compressor=numcodecs.Blosc("lz4", 5, 1))

    return opened, consolidated, writer, lambda a, v: a.__setitem__(Ellipsis, v), \
        lambda a: a[...]


def lib_chunkstore(endpoint, threads=None):
    """chunkstore as a user opens an s3:// URL with s3fs-style storage_options (obstore's S3
    client since the s3_direct path was removed; before that, FSStore over s3fs)."""
    from chunkstore.storage import normalize_store

    so = storage_options(endpoint)

    def store(path, mode="r"):
        return normalize_store(f"s3://{BUCKET}/{path}", mode=mode, storage_options=so)

    return _chunkstore_workloads(store, "out-cs", threads)


def lib_chunkstore_s3fs(endpoint, threads=None):
    """chunkstore's FSStore, every request through s3fs."""
    from chunkstore.storage import FSStore

    so = storage_options(endpoint)

    def store(path, mode="r"):
        return FSStore(f"s3://{BUCKET}/{path}", mode=mode, storage_options=so)

    return _chunkstore_workloads(store, "out-fs", threads)


def lib_zarr(endpoint, threads=None):
    import numcodecs
    import s3fs
    import zarr
    from zarr.storage import FsspecStore

    fs = s3fs.S3FileSystem(asynchronous=True, **storage_options(endpoint))

    def store(path, read_only=True):
        return FsspecStore(fs, path=f"{BUCKET}/{path}", read_only=read_only)

    def opened():
        return zarr.open_array(store("src"), mode="r")

    def consolidated():
        g = zarr.open_consolidated(store("group"), zarr_format=2, mode="r")
        return sorted(name for name, _ in g.arrays())

    def writer():
        return zarr.create_array(store("out-zarr", False), shape=SHAPE, chunks=CHUNKS,
                                 dtype="f4", zarr_format=2, overwrite=True,
                                 compressors=numcodecs.Blosc("lz4", 5, 1))

    return opened, consolidated, writer, lambda a, v: a.__setitem__(Ellipsis, v), \
        lambda a: a[...]


def lib_tensorstore(endpoint, threads=None):
    import tensorstore as ts

    os.environ.setdefault("AWS_ACCESS_KEY_ID", KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SECRET)
    ctx = ts.Context()

    def spec(path):
        return {"driver": "zarr",
                "kvstore": {"driver": "s3", "bucket": BUCKET, "path": path + "/",
                            "endpoint": endpoint, "aws_region": "us-east-1"}}

    def opened():
        # A new context: no metadata cached by an earlier open (the others read it too).
        return ts.open(spec("src"), context=ts.Context(), read=True).result()

    def writer():
        s = spec("out-ts")
        s["metadata"] = {"shape": list(SHAPE), "chunks": list(CHUNKS), "dtype": "<f4",
                         "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5,
                                        "shuffle": 1}}
        return ts.open(s, context=ctx, create=True, delete_existing=True).result()

    return opened, None, writer, lambda a, v: a.write(v).result(), \
        lambda a: a.read().result()


LIBS = {"chunkstore": lib_chunkstore, "chunkstore before": lib_chunkstore,
        "chunkstore s3fs": lib_chunkstore_s3fs, "zarr": lib_zarr,
        "tensorstore": lib_tensorstore}


def lib_factory(lib):
    if lib.startswith("chunkstore io="):  # chunkstore with another io_concurrency
        n = int(lib.split("=", 1)[1])

        def make(endpoint):
            import chunkstore as cs
            cs.config.set(io_concurrency=n)
            return lib_chunkstore(endpoint)
        return make
    return LIBS[lib]


def worker(lib, endpoint, log_path, repeat):
    import numpy as np

    data = make_data()
    opened, consolidated, writer, write, read_all = lib_factory(lib)(endpoint)
    log = Log(log_path)
    w = (slice(300, 812), slice(300, 812))  # 512² across 3x3 chunks
    results = {}

    def arr_read(a, sel):
        if lib == "tensorstore":
            return a[sel].read().result()
        return a[sel]

    def check(got, want, what):
        if not np.array_equal(np.asarray(got), want):
            raise AssertionError(f"{lib}: wrong data from {what}")

    held = opened()
    expected_names = [f"a{i:02d}" for i in range(N_GROUP)]
    wa = writer()

    def run(name, fn, verify):
        times, counts = [], []
        fn()  # warm-up: connections, imports, lazy pools
        for _ in range(repeat):
            before = log.count()
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
            counts.append(_fmt_requests(before, log.count()))
            verify(out)
        n, by = counts[len(counts) // 2]
        results[name] = {"ms": statistics.median(times) * 1e3, "requests": n, "by": by}

    run("open", opened, lambda a: None)
    run("read_all", lambda: read_all(held), lambda out: check(out, data, "read all"))
    run("window", lambda: arr_read(held, w), lambda out: check(out, data[w], "window"))
    run("elem_fresh", lambda: arr_read(opened(), (1000, 1000)),
        lambda out: check(out, data[1000, 1000], "element"))
    run("elem_open", lambda: arr_read(held, (1000, 1000)),
        lambda out: check(out, data[1000, 1000], "element"))
    if consolidated is not None:
        run("consolidated", consolidated,
            lambda names: names == expected_names or (_ for _ in ()).throw(
                AssertionError(f"{lib}: arrays listed {names}")))
    run("write", lambda: write(wa, data), lambda out: None)
    check(read_all(wa), data, "read after write")
    print(json.dumps(results))


# ---------------------------------------------------------------------------------- driver
def setup_data(endpoint):
    import boto3
    import numcodecs
    import s3fs
    import zarr
    from zarr.storage import FsspecStore

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                 aws_secret_access_key=SECRET, region_name="us-east-1").create_bucket(
        Bucket=BUCKET)
    fs = s3fs.S3FileSystem(asynchronous=True, **storage_options(endpoint))
    z = zarr.create_array(FsspecStore(fs, path=f"{BUCKET}/src"), shape=SHAPE, chunks=CHUNKS,
                          dtype="f4", zarr_format=2, compressors=numcodecs.Blosc("lz4", 5, 1))
    z[...] = make_data()
    gstore = FsspecStore(fs, path=f"{BUCKET}/group")
    g = zarr.open_group(gstore, mode="w", zarr_format=2)
    for i in range(N_GROUP):
        g.create_array(f"a{i:02d}", shape=(100, 100), chunks=(50, 50), dtype="i4")
    zarr.consolidate_metadata(gstore)
    from zarr.core.sync import sync

    sync(fs.s3.close())  # its connections, on zarr's event loop (else a warning at exit)


def run_worker(lib, endpoint, log_path, repeat, pythonpath):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([pythonpath, env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--endpoint", endpoint,
           "--log", log_path, "--repeat", str(repeat)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise RuntimeError(f"{lib} worker failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rtt", type=float, nargs="*", default=[0, 20], help="round trips, ms")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--libs", nargs="*", default=["chunkstore", "zarr", "tensorstore"])
    p.add_argument("--before", help="an older chunkstore checkout (built in place)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every library this many times, interleaved; report the median")
    p.add_argument("--io-concurrency", type=int, nargs="*", default=[],
                   help="also run chunkstore with these io_concurrency settings")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--endpoint", help=argparse.SUPPRESS)
    p.add_argument("--log", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.endpoint, args.log, args.repeat)
        return

    libs = list(args.libs) + [f"chunkstore io={n}" for n in args.io_concurrency]
    paths = {lib: ROOT for lib in libs}
    if args.before:
        libs.insert(0, "chunkstore before")
        paths["chunkstore before"] = os.path.abspath(args.before)
    table = run_all(libs, args.rtt, args.repeat, args.rounds, paths)
    print_table(table, args.rtt, libs)


def run_all(libs, rtts, repeat=5, rounds=1, paths=None):
    """{(rtt, lib): {workload: {"ms", "requests", "by"}}}: the server, one proxy per RTT,
    and every library's worker process, *rounds* times interleaved."""
    paths = paths or {}
    tmp = tempfile.mkdtemp(prefix="s3lat-")
    log_path = os.path.join(tmp, "server.log")
    s3_port = free_port()
    procs = []
    try:
        with open(log_path, "w") as logf:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
                stdout=logf, stderr=subprocess.STDOUT))
        wait_port(s3_port)
        setup_data(f"http://127.0.0.1:{s3_port}")
        table = {}
        for rtt in rtts:
            port = free_port()
            procs.append(subprocess.Popen(
                [sys.executable, "-c",
                 f"import sys; sys.path.insert(0, {HERE!r}); import s3_latency as m; "
                 f"m.run_proxy({port}, {s3_port}, {rtt})"]))
            wait_port(port)
            runs = {lib: [] for lib in libs}
            for r in range(rounds):  # interleaved, so that load changes hit all alike
                for lib in libs:
                    runs[lib].append(run_worker(lib, f"http://127.0.0.1:{port}", log_path,
                                                repeat, paths.get(lib, ROOT)))
                    print(f"# done: {lib} at {rtt:g} ms, round {r + 1}", file=sys.stderr)
            for lib in libs:
                table[(rtt, lib)] = {
                    name: dict(runs[lib][0][name], ms=statistics.median(
                        x[name]["ms"] for x in runs[lib]))
                    for name in runs[lib][0]}
        return table
    finally:
        for pr in procs:
            pr.terminate()
        for pr in procs:
            pr.wait()


def print_table(table, rtts, libs):
    for rtt in rtts:
        print(f"\n### {rtt:g} ms RTT (median ms; requests per run)\n")
        head = "| workload | " + " | ".join(libs)
        ratios = [lib for lib in ("zarr", "tensorstore") if lib in libs and "chunkstore" in libs]
        head += "".join(f" | chunkstore/{r}" for r in ratios)
        print(head + " |")
        print("|---" * (1 + len(libs) + len(ratios)) + "|")
        for name, desc in WORKLOADS:
            cells = []
            for lib in libs:
                r = table[(rtt, lib)].get(name)
                cells.append("—" if r is None else f"{r['ms']:.0f} ({r['requests']})")
            for o in ratios:
                a, b = table[(rtt, "chunkstore")].get(name), table[(rtt, o)].get(name)
                cells.append("—" if a is None or b is None else f"{a['ms'] / b['ms']:.2f}")
            print(f"| {desc} | " + " | ".join(cells) + " |")
        detail = {lib: {n: table[(rtt, lib)][n]["by"] for n, _ in WORKLOADS
                        if n in table[(rtt, lib)]} for lib in libs}
        print("\nrequests by method:", json.dumps(detail))


if __name__ == "__main__":
    main()
