"""Compare two `pytest -rA` logs: of the tests the first (baseline) passes, how many the
second passes, per Zarr format (the test id's ``default_zarr_format`` parameter, 2 or 3),
and the failures, by test name. Given the test file, the tests of zarr-python's internals
are counted apart (see `instrumented`)."""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter


def outcomes(path: str) -> dict[str, str]:
    """{test id: PASSED | FAILED | ERROR | SKIPPED | XFAIL | XPASS} from a ``-rA`` summary."""
    out = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+)", line)
        if m:
            out.setdefault(m.group(2), m.group(1))
    return out


def zarr_format(test_id: str) -> str:
    m = re.search(r"\[(\d)\b|-(\d)\]|\[(\d)-|-(\d)-", test_id)
    return next((g for g in m.groups() if g), "?") if m else "?"


def instrumented(test_file: str) -> set[str]:
    """Names of the test functions that patch zarr-python's own classes (``patch.object`` of
    ``zarr.AsyncArray``, ``zarr.AsyncGroup``, their indexers) and assert that those were
    called: they test zarr-python's internals, which another engine never calls."""
    text = open(test_file, encoding="utf-8").read()
    tree = ast.parse(text)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            src = ast.get_source_segment(text, node) or ""
            if "patch.object(" in src and re.search(r"zarr\.(Async|core)", src):
                out.add(node.name)
    return out


def main(base_log: str, new_log: str, test_file: str | None = None) -> None:
    base, new = outcomes(base_log), outcomes(new_log)
    passed = [t for t, o in base.items() if o == "PASSED"]
    internal = instrumented(test_file) if test_file else set()
    if internal:
        name = lambda t: re.sub(r"\[.*", "", t.split("::")[-1])  # noqa: E731
        left_out = [t for t in passed if name(t) in internal]
        print(f"left out: {len(left_out)} passing tests of zarr-python's internals "
              f"({', '.join(sorted(internal))}): they patch zarr.AsyncArray/AsyncGroup and "
              f"assert those were called")
        passed = [t for t in passed if name(t) not in internal]
    total, ok = Counter(), Counter()
    failing = []
    for t in passed:
        f = zarr_format(t)
        total[f] += 1
        if new.get(t) == "PASSED":
            ok[f] += 1
        else:
            failing.append((t, new.get(t, "missing")))
    for f in sorted(total):
        print(f"zarr v{f}: {ok[f]}/{total[f]} ({100 * ok[f] / total[f]:.1f}%)")
    n, m = sum(ok.values()), sum(total.values())
    print(f"all: {n}/{m} ({100 * n / max(m, 1):.1f}%) of what the zarr engine passes")
    by_name = Counter(re.sub(r"\[.*", "", t.split("::")[-1]) for t, _ in failing)
    print("\nfailing (test name: count):")
    for name, c in by_name.most_common():
        print(f"  {c:4d} {name}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
