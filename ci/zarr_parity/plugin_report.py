"""The end-of-run report of the chunkstore-as-zarr pytest plugins (ci/zarr_parity/
chunkstore_as_zarr.py for zarr-python 3, ci/zarr2_parity/chunkstore_as_zarr2.py for
zarr-python 2): what each did to zarr's modules, one line each."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping


def header(prefix: str, routed: str | None) -> list[str]:
    """The report header: which zarr the run imports, and (routing) what the plugin did."""
    import zarr
    lines = [f"zarr: {zarr.__name__} {getattr(zarr, '__version__', '?')} from {zarr.__file__}"]
    if routed:
        lines.append(f"{prefix}: {routed}")
    return lines


def write_report(write: Callable[[str], object], prefix: str, notes: Iterable[str],
                 routed: Iterable[str], missing_names: Mapping[str, Iterable[str]],
                 left: Iterable[str], shadowed: Mapping[str, Iterable[str]],
                 missing_suffix: str = "",
                 failed_imports: Mapping[str, object] | None = None) -> None:
    """Write the plugin's notes, its routed modules (lines made by the plugin: "replaced
    ..." or "blended ..."), the public names chunkstore lacks, the modules left to
    zarr-python (with the names chunkstore shadows in them) and the modules that did not
    import, each line starting with prefix."""
    for n in notes:
        write(f"{prefix}: note: {n}")
    for line in routed:
        write(f"{prefix}: {line}")
    for name, miss in sorted(missing_names.items()):
        write(f"{prefix}: {name}: chunkstore lacks {', '.join(miss)}{missing_suffix}")
    for name in left:
        extra = f" (but {', '.join(shadowed[name])}: chunkstore's)" if name in shadowed else ""
        write(f"{prefix}: left to zarr-python {name}{extra}")
    for name, err in sorted((failed_imports or {}).items()):
        write(f"{prefix}: not importable {name}: {err}")
