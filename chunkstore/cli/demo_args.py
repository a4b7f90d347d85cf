"""The demo job's command line (``python -m chunkstore.cli.demo``), on the standard library
alone: ``ci/demo.sh --help`` runs this file with the system Python and answers at once,
before any set-up (no venv, no build)."""

from __future__ import annotations

import argparse


def parser() -> argparse.ArgumentParser:
    """The demo's argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m chunkstore.cli.demo",
        description="Write a float32 2-D array (smooth field + noise) to a chunkstore "
                    "DirectoryStore, read it back whole and in slices, verify it, and compare "
                    "throughput with np.save/np.load.")
    p.add_argument("--size-mb", type=float, default=256.0,
                   help="array size in MiB (default 256)")
    p.add_argument("--dir", default=None,
                   help="parent directory for the demo's files (default: the system temp "
                        "dir); a fresh subdirectory is made in it and removed at the end")
    p.add_argument("--chunk", type=int, default=1024,
                   help="chunk edge, chunks are CHUNK x CHUNK (default 1024)")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise (default 0)")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of each operation; the fastest is reported (default 3)")
    p.add_argument("--keep", action="store_true", help="keep the files instead of removing them")
    return p


if __name__ == "__main__":
    parser().parse_args()
