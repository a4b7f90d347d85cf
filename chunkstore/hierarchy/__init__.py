"""Nodes and groups: creation and opening, the zarr-python 2 convenience functions,
attributes, and re-encoding (recode)."""
