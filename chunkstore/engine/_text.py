"""Small text helpers shared by the reports of the library and the command line."""

from __future__ import annotations

__all__ = ["human_bytes"]


def human_bytes(n: float, compact: bool = False) -> str:
    """A byte count for people, in binary units: "1.5 MiB" (the command line's style), or with
    compact=True zarr-python's .info style, "1.5M" (bytes as a bare number)."""
    units = ("", "K", "M", "G", "T", "P") if compact else ("B", "KiB", "MiB", "GiB", "TiB")
    for unit in units:
        if abs(n) < 1024 or unit == units[-1]:
            if unit == units[0]:
                return f"{n}" if compact else f"{n} {unit}"
            return f"{n:.1f}{unit}" if compact else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
