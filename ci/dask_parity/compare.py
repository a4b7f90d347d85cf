"""Compare two `pytest -rA` logs of dask's Zarr tests: of the tests the first (baseline,
zarr-python) passes, how many the second (chunkstore in zarr's place) passes, per test file,
and the failures with their error line. Tests that ran on chunkstore only because
ci/dask_parity/chunkstore_as_zarr.py ignored a ``minversion`` gate are marked."""

from __future__ import annotations

import re
import sys
from collections import Counter


def norm(test_id: str) -> str:
    """A test id from dask's package on: ids are relative to the current directory in
    pytest's summary and to the rootdir in the plugin's lines."""
    path, sep, rest = test_id.partition("::")
    i = path.rfind("dask/")
    return (path[i:] if i >= 0 else path) + sep + rest


def outcomes(path: str) -> dict[str, tuple[str, str]]:
    """{test id: (PASSED | FAILED | ERROR | SKIPPED | XFAIL | XPASS, message)} from ``-rA``."""
    out = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+)(?: - (.*))?", line)
        if m:
            out.setdefault(norm(m.group(2)), (m.group(1), (m.group(3) or "").strip()))
        m = re.match(r"skipped test: (\S+) - (.*)", line)
        if m:  # -rA reports skips by location; ci/dask_parity/chunkstore_as_zarr.py by id
            out.setdefault(norm(m.group(1)), ("SKIPPED", m.group(2).strip()))
    return out


def errors(path: str) -> dict[str, str]:
    """{test name: its last ``E`` line} from the FAILURES and ERRORS sections (``--tb=short``),
    for the messages ``-q -rA`` leaves out of the summary."""
    out, name = {}, None
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"_{3,} (?:ERROR at \w+ of )?(\S+) _{3,}$", line)
        if m:
            name = m.group(1)
        elif line.startswith("=") and ("PASSES" in line or "short test summary" in line):
            name = None
        elif name and line.startswith("E "):
            out[name] = line[1:].strip()
    return out


def gate_ignored(path: str) -> set[str]:
    return {norm(m.group(1)) for line in open(path, encoding="utf-8", errors="replace")
            if (m := re.match(r"version gate ignored: (\S+)", line))}


def short_file(test_id: str) -> str:
    return test_id.split("::")[0].removeprefix("dask/")


def zarr_module(path: str) -> str:
    return next((m.group(1) for line in open(path, encoding="utf-8", errors="replace")
                 if (m := re.match(r"zarr module: (.*)", line))), "?")


def main(base_log: str, new_log: str) -> None:
    base, new = outcomes(base_log), outcomes(new_log)
    print(f"baseline zarr: {zarr_module(base_log)}\nrouted zarr: {zarr_module(new_log)}")
    gated, messages = gate_ignored(new_log), errors(new_log)
    passed = [t for t, (o, _) in base.items() if o == "PASSED"]
    total, ok = Counter(), Counter()
    failing = []
    for t in passed:
        f = short_file(t)
        total[f] += 1
        if new.get(t, ("missing",))[0] == "PASSED":
            ok[f] += 1
        else:
            o, msg = new.get(t, ("missing", ""))
            failing.append((t, o, msg or messages.get(t.split("::")[-1], "")))
    not_passed = Counter(o for t, (o, _) in base.items() if o != "PASSED")
    print(f"baseline (zarr-python): {len(passed)} passed"
          + "".join(f", {n} {o.lower()}" for o, n in sorted(not_passed.items())))
    for f in sorted(total):
        print(f"  {f}: {ok[f]}/{total[f]}")
    n, m = sum(ok.values()), sum(total.values())
    print(f"chunkstore: {n}/{m} ({100 * n / max(m, 1):.1f}%) of what zarr-python passes")
    if gated:
        g = [t for t in passed if t in gated]
        print(f"  of them {len(g)} ran only because the zarr minversion gate was ignored "
              f"({sum(new.get(t, ('',))[0] == 'PASSED' for t in g)} passed)")
    extra = [t for t, (o, _) in new.items() if o == "PASSED" and base.get(t, ("",))[0] != "PASSED"]
    if extra:
        print(f"  and {len(extra)} that zarr-python does not pass: {', '.join(extra)}")
    if failing:
        print("\nfailing on chunkstore:")
        for t, o, msg in failing:
            mark = " [gate ignored]" if t in gated else ""
            print(f"  {o} {t.split('::', 1)[-1]}{mark}: {msg[:160]}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
