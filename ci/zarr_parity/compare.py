"""Compare the junit XML of the two runs of ci/zarr_parity/run.sh: of the tests zarr-python
passes (baseline), how many chunkstore in zarr's place passes, per test module; and the
chunkstore failures (of those tests) grouped by the first line of their error, top 20, with
one example test id each, then by exception type.

    python ci/zarr_parity/compare.py BASELINE_DIR CHUNKSTORE_DIR [TOP]

Each directory holds one <module>.xml per test module (pytest --junitxml). A test missing
from the chunkstore XML (its module timed out, or failed to collect) counts as failing with
"missing"; a module whose chunkstore run failed to collect shows its collection error."""

from __future__ import annotations

import glob
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict


def outcomes(path: str) -> dict[str, tuple[str, str]]:
    """{test id: (passed | failed | error | skipped, first line of the message)}."""
    out: dict[str, tuple[str, str]] = {}
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, FileNotFoundError):
        return out
    for case in root.iter("testcase"):
        # (pytest names a parameter that is a str by its value: chunkstore's
        # ShardingCodecIndexLocation is a str Enum, zarr's a plain Enum, so one test has
        # "start" in one run's id and "ShardingCodecIndexLocation.start" in the other's)
        name = re.sub(r"ShardingCodecIndexLocation\.(start|end)", r"\1", case.get("name", ""))
        tid = f"{case.get('classname', '')}::{name}"
        state, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                state = {"failure": "failed"}.get(child.tag, child.tag)
                text = child.get("message") or child.text or ""
                msg = text.strip().splitlines()[0] if text.strip() else ""
                break
        # a teardown error after a pass is reported as a second <testcase> of the same id
        if tid in out and out[tid][0] != "passed":
            continue
        out[tid] = (state, msg)
    return out


def normalize(msg: str) -> str:
    msg = re.sub(r"0x[0-9a-fA-F]+", "0x…", msg)
    msg = re.sub(r"/tmp/[^\s'\")]+", "/tmp/…", msg)
    return msg[:160] or "(no message)"


def main(base_dir: str, new_dir: str, top: str = "20") -> None:
    groups: dict[str, list[str]] = defaultdict(list)
    types: Counter[str] = Counter()
    tot_b = tot_n = tot_all = 0
    print(f"{'module':40s} {'tests':>6s} {'zarr ok':>8s} {'chunkstore ok':>14s}")
    for base_xml in sorted(glob.glob(os.path.join(base_dir, "*.xml"))):
        mod = os.path.basename(base_xml)[:-4]
        base = outcomes(base_xml)
        new = outcomes(os.path.join(new_dir, mod + ".xml"))
        passed = [t for t, (s, _) in base.items() if s == "passed"]
        ok = 0
        for t in passed:
            state, msg = new.get(t, ("missing", "missing from chunkstore's run"))
            if state == "passed":
                ok += 1
            else:
                m = normalize(msg if state != "skipped" else "skipped: " + msg)
                groups[m].append(t)
                types[m.split(":", 1)[0] if ":" in m[:60] else m[:60]] += 1
        tot_all += len(base); tot_b += len(passed); tot_n += ok
        pct = f"({100 * ok / len(passed):.1f}%)" if passed else ""
        print(f"{mod:40s} {len(base):6d} {len(passed):8d} {ok:8d} {pct}")
        if not new:
            print(f"  !! no results from chunkstore's run of {mod} (see {new_dir}/{mod}.txt)")
    print(f"{'all':40s} {tot_all:6d} {tot_b:8d} {tot_n:8d} "
          f"({100 * tot_n / max(tot_b, 1):.1f}%) of what zarr-python passes")
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    print(f"\n{len(ranked)} failure groups (first line of the error); top {top}:")
    for msg, tests in ranked[: int(top)]:
        print(f"  {len(tests):5d} {msg}\n        e.g. {tests[0]}")
    print("\nby exception type:")
    for t, c in types.most_common(15):
        print(f"  {c:5d} {t}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
