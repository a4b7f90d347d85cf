"""ObjectStore (obstore) against FsspecStore (s3fs) reading a chunked array (400 chunks of
40 KB) from a local moto S3 server, alternating, values checked. Needs moto[server], s3fs,
boto3 and obstore (the ``[bench]`` extra). Prints one line per store and repetition.

    python asv_bench/s3_object_store.py             # 3 repetitions
    python asv_bench/s3_object_store.py --repeat 5
"""

from __future__ import annotations

import argparse
import logging
import socket
import time

import numpy as np


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="repetitions of each store's read")
    a = p.parse_args(argv)

    import boto3
    from moto.server import ThreadedMotoServer
    from obstore.store import S3Store

    import chunkstore as cs
    from chunkstore.storage import FsspecStore, ObjectStore

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log
    port = _free_port()
    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    srv.start()
    try:
        ep = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=ep, aws_access_key_id="a", aws_secret_access_key="b",
                     region_name="us-east-1").create_bucket(Bucket="bench-bucket")
        obs = ObjectStore(S3Store("bench-bucket", endpoint=ep, access_key_id="a",
                                  secret_access_key="b", region="us-east-1",
                                  client_options={"allow_http": True}))
        fss = FsspecStore.from_url("s3://bench-bucket", storage_options=dict(
            key="a", secret="b", client_kwargs={"endpoint_url": ep,
                                                "region_name": "us-east-1"}))
        data = np.random.default_rng(0).random((2000, 2000)).astype("f4")
        z = cs.create_array(fss, name="a", shape=data.shape, chunks=(100, 100), dtype="f4",
                            compressors=None)  # 400 chunks of 40 KB
        z[...] = data
        stores = [("ObjectStore", obs), ("FsspecStore", fss)]
        for rep in range(a.repeat):
            for name, st in (stores if rep % 2 == 0 else stores[::-1]):
                arr = cs.open_array(st, path="a", mode="r")
                t = time.perf_counter()
                out = arr[...]
                dt = time.perf_counter() - t
                if not (out == data).all():
                    raise SystemExit(f"{name}: the values read differ from those written")
                print(f"{name:12s} read 400 chunks: {dt * 1000:7.1f} ms", flush=True)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
