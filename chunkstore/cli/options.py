"""Command-line options shared by the CLI's commands: --storage-option for fsspec URLs, and
the confirmation that destructive commands (rm) ask for."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["parse_storage_option", "storage_options", "confirm"]

STORAGE_OPTION_HELP = (
    "an fsspec option for URL stores, KEY=VALUE, repeatable: e.g. "
    "endpoint_url=http://localhost:9000, anon=true, client_kwargs.region_name=eu-west-1 "
    "(dots nest; VALUE is read as JSON when it parses, else as text)")


def parse_storage_option(text):
    """("KEY", value) from "KEY=VALUE"; VALUE as JSON (true, 3, {"a": 1}) or else text."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise argparse.ArgumentTypeError(f"a storage option is KEY=VALUE, got {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return key, parsed


def storage_options(*pairs_lists):
    """One options dict from lists of (dotted key, value) pairs, later lists winning;
    None when there are none. "a.b=1" becomes {"a": {"b": 1}}."""
    out = {}
    for pairs in pairs_lists:
        for key, value in pairs or ():
            *parents, last = key.split(".")
            d = out
            for p in parents:
                nxt = d.setdefault(p, {})
                if not isinstance(nxt, dict):
                    raise argparse.ArgumentTypeError(
                        f"storage option {key!r} nests inside {p!r}, which is already a value")
                d = nxt
            d[last] = value
    return out or None


def confirm(question, assume_yes):
    """True to go ahead. assume_yes (-f/--yes) answers yes; otherwise a terminal is asked
    (default no); without a terminal there is nobody to ask, and the answer is no."""
    if assume_yes:
        return True
    try:
        interactive = sys.stdin.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if not interactive:
        return None
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")
