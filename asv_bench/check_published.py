"""Check a published asv site: every benchmark in index.json has a measured value in its
graph JSON at the newest benchmarked commit (and say how many commits each has data for).

    python asv_bench/check_published.py HTML_DIR [--commit SHA] [--bench REGEX]

Exit status 1, listing them, when a benchmark has no data; 0 otherwise.
"""

import argparse
import json
import math
import re
import pathlib
import sys


def has_value(v):
    if v is None:
        return False
    if isinstance(v, list):
        return any(has_value(x) for x in v)
    return not (isinstance(v, float) and math.isnan(v))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html_dir")
    ap.add_argument("--commit", help="the commit every benchmark must have data for "
                                     "(default: the newest with any result)")
    ap.add_argument("--bench", default="", help="only benchmarks matching this regex "
                                                "(what asv run --bench ran)")
    args = ap.parse_args(argv)
    html = pathlib.Path(args.html_dir)
    index = json.loads((html / "index.json").read_text())
    benchmarks = sorted(b for b in index["benchmarks"] if re.search(args.bench, b))
    revisions = index["revision_to_hash"]  # revision number (str) -> commit hash
    by_hash = {h: int(r) for r, h in revisions.items()}
    graphs = {}
    for path in (html / "graphs").rglob("*.json"):
        name = path.stem
        if name in index["benchmarks"]:
            graphs.setdefault(name, []).append(json.loads(path.read_text()))
    per_bench = {}
    for name in benchmarks:
        revs = set()
        for g in graphs.get(name, []):
            revs |= {int(rev) for rev, value in g if has_value(value)}
        per_bench[name] = revs
    measured = set().union(*per_bench.values()) if per_bench else set()
    if not measured:
        sys.exit(f"check_published: no benchmark has any data in {html}")
    if args.commit:
        target = next((r for h, r in by_hash.items() if h.startswith(args.commit)), None)
        if target is None:
            sys.exit(f"check_published: commit {args.commit} is not in {html}/index.json")
    else:
        target = max(measured)
    missing = [n for n in benchmarks if target not in per_bench[n]]
    ncommits = len(measured)
    print(f"check_published: {len(benchmarks)} benchmarks, {ncommits} commits with results; "
          f"at {revisions[str(target)][:10]}: {len(benchmarks) - len(missing)} with data")
    for n in benchmarks:
        print(f"  {n}: data at {len(per_bench[n])}/{ncommits} commits")
    if missing:
        sys.exit("check_published: no data at the newest commit for: " + ", ".join(missing))


if __name__ == "__main__":
    main()
