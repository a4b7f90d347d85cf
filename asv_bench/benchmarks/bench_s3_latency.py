"""asv view of asv_bench/s3_latency.py: chunkstore's S3 workloads at 0 and 20 ms RTT.

One setup_cache runs the moto server, the delaying proxy and a chunkstore worker process
(see s3_latency.py); the tracks report its median milliseconds and request counts. The
comparison with zarr-python 3 and tensorstore is the script's own table."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKLOADS = ["open", "read_all", "window", "elem_fresh", "elem_open", "consolidated", "write"]


class S3Latency:
    timeout = 900
    params = ([0, 20], WORKLOADS)
    param_names = ["rtt_ms", "workload"]
    unit = "ms"

    def setup_cache(self):
        import s3_latency

        table = s3_latency.run_all(["chunkstore"], [0, 20], repeat=3)
        return {rtt: table[(rtt, "chunkstore")] for rtt in (0, 20)}

    def track_ms(self, cache, rtt, workload):
        return cache[rtt][workload]["ms"]

    def track_requests(self, cache, rtt, workload):
        return cache[rtt][workload]["requests"]

    track_requests.unit = "requests"
