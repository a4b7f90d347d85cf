"""ObjectStore (obstore) vs FsspecStore (s3fs) reading a chunked array (400 chunks of 40 KB)
from a local moto S3 server: python asv_bench/s3_object_store.py (needs moto[server], s3fs,
obstore). Prints one line per store and repetition."""
import logging
import time

import numpy as np
from moto.server import ThreadedMotoServer
import chunkstore as cs
from chunkstore.storage import ObjectStore, FsspecStore

logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log
srv = ThreadedMotoServer(port=5099, verbose=False); srv.start()
ep = "http://127.0.0.1:5099"
import boto3
boto3.client("s3", endpoint_url=ep, aws_access_key_id="a", aws_secret_access_key="b",
             region_name="us-east-1").create_bucket(Bucket="bench-bucket")
from obstore.store import S3Store
obs = ObjectStore(S3Store("bench-bucket", endpoint=ep, access_key_id="a", secret_access_key="b",
                          region="us-east-1", client_options={"allow_http": True}))
fss = FsspecStore.from_url("s3://bench-bucket", storage_options=dict(
    key="a", secret="b", client_kwargs={"endpoint_url": ep, "region_name": "us-east-1"}))
data = np.random.default_rng(0).random((2000, 2000)).astype("f4")
z = cs.create_array(fss, name="a", shape=data.shape, chunks=(100, 100), dtype="f4",
                    compressors=None)  # 400 chunks of 40 KB
z[...] = data
for rep in range(3):
    for name, st in (("ObjectStore", obs), ("FsspecStore", fss)):
        a = cs.open_array(st, path="a", mode="r")
        t = time.perf_counter(); out = a[...]; dt = time.perf_counter() - t
        assert (out == data).all()
        print(f"{name:12s} read 400 chunks: {dt*1000:7.1f} ms", flush=True)
srv.stop()
