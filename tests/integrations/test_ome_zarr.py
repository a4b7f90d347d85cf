"""OME-Zarr (OME-NGFF) round trips with ome-zarr-py: NGFF v0.4 on Zarr v2, v0.5 on Zarr v3,
and v0.5 on sharded Zarr v3.

ome-zarr-py writes a multiscale pyramid and chunkstore reads it; chunkstore writes one and
ome-zarr-py's reader reads it; and ome-zarr-py runs with chunkstore in place of zarr
(``sys.modules["zarr"] = chunkstore``, in a subprocess so this session's zarr is untouched).

The image is constant on 4 x 4 blocks, so the levels ome-zarr-py computes with nearest
downsampling are known exactly: every pixel of a block has the block's value whichever pixel
the method picks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import chunkstore as cs

pytest.importorskip("ome_zarr")
zarr = pytest.importorskip("zarr")

from ome_zarr.format import FormatV04, FormatV05  # noqa: E402
from ome_zarr.io import parse_url  # noqa: E402
from ome_zarr.reader import Multiscales, Reader  # noqa: E402
from ome_zarr.scale import Methods  # noqa: E402
from ome_zarr.writer import write_image, write_multiscale  # noqa: E402

SMALL = np.arange(2 * 16 * 12, dtype="u2").reshape(2, 16, 12) * 7 + 3
IMAGE = np.kron(SMALL, np.ones((1, 4, 4), dtype="u2"))            # (2, 64, 48), c y x
LEVELS = [IMAGE, np.kron(SMALL, np.ones((1, 2, 2), dtype="u2")), SMALL]
AXES = ["c", "y", "x"]

# (NGFF version, Zarr format, ome-zarr-py storage_options, expected chunks, expected shards)
CASES = {
    "v0.4-zarr2": ("0.4", 2, {"chunks": (1, 16, 16)}, (1, 16, 16), None),
    "v0.5-zarr3": ("0.5", 3, {"chunks": (1, 16, 16)}, (1, 16, 16), None),
    "v0.5-zarr3-sharded": ("0.5", 3, {"chunks": (1, 8, 8), "shards": (1, 16, 16)},
                           (1, 8, 8), (1, 16, 16)),
}


def fmt_of(version):
    return FormatV04() if version == "0.4" else FormatV05()


def multiscales_of(attrs, version):
    """The `multiscales` list: top level in v0.4, under `ome` (with the version) in v0.5."""
    if version == "0.4":
        assert "ome" not in attrs
        ms = attrs["multiscales"]
        assert ms[0]["version"] == "0.4"
    else:
        assert "multiscales" not in attrs
        assert attrs["ome"]["version"] == "0.5"
        ms = attrs["ome"]["multiscales"]
    assert len(ms) == 1
    return ms[0]


def check_multiscales(ms, paths, scales, name):
    assert [a["name"] for a in ms["axes"]] == AXES
    assert [a["type"] for a in ms["axes"]] == ["channel", "space", "space"]
    assert ms["name"] == name
    assert [d["path"] for d in ms["datasets"]] == paths
    got = [next(t["scale"] for t in d["coordinateTransformations"] if t["type"] == "scale")
           for d in ms["datasets"]]
    assert got == scales


def check_format_on_disk(path, zarr_format):
    if zarr_format == 2:
        assert os.path.exists(os.path.join(path, ".zgroup"))
        assert not os.path.exists(os.path.join(path, "zarr.json"))
    else:
        assert os.path.exists(os.path.join(path, "zarr.json"))
        assert not os.path.exists(os.path.join(path, ".zgroup"))


# ---------------------------------------------------------------- ome-zarr-py writes, chunkstore reads

@pytest.mark.parametrize("case", list(CASES))
def test_chunkstore_reads_a_pyramid_ome_zarr_py_wrote_with_write_image(tmp_path, case):
    version, zarr_format, options, chunks, shards = CASES[case]
    path = str(tmp_path / "image.ome.zarr")
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    write_image(IMAGE, root, scale_factors=(2, 4), method=Methods.NEAREST, fmt=fmt_of(version),
                axes="".join(AXES), storage_options=options, name="blocks")
    check_format_on_disk(path, zarr_format)

    g = cs.open_group(path, mode="r")
    assert g.metadata.zarr_format == zarr_format
    ms = multiscales_of(g.attrs.asdict(), version)
    check_multiscales(ms, ["s0", "s1", "s2"],
                      [[1.0, 1.0, 1.0], [1.0, 2.0, 2.0], [1.0, 4.0, 4.0]], "blocks")
    assert sorted(g.array_keys()) == ["s0", "s1", "s2"]
    for ds, expected in zip(ms["datasets"], LEVELS):
        a = g[ds["path"]]
        assert a.metadata.zarr_format == zarr_format
        assert a.shape == expected.shape and a.dtype == np.dtype("u2")
        assert a.chunks == chunks and a.shards == shards
        if zarr_format == 3:
            assert tuple(a.metadata.dimension_names) == tuple(AXES)
        got = a[...]
        np.testing.assert_array_equal(got, expected)
        # what zarr-python reads from the same store
        np.testing.assert_array_equal(got, zarr.open_array(path, path=ds["path"], mode="r")[...])
        np.testing.assert_array_equal(a[1, 3:29, 5:11], expected[1, 3:29, 5:11])
    # the keys ome-zarr-py wrote: nested ("/") in v2, one object per shard when sharded
    if zarr_format == 2:
        assert os.path.isfile(os.path.join(path, "s0", "1", "3", "2"))
    elif shards:
        shard_files = [f for _, _, fs in os.walk(os.path.join(path, "s0", "c")) for f in fs]
        assert len(shard_files) == 2 * 4 * 3


@pytest.mark.parametrize("case", ["v0.4-zarr2", "v0.5-zarr3", "v0.5-zarr3-sharded"])
def test_chunkstore_reads_explicit_levels_ome_zarr_py_wrote_with_write_multiscale(tmp_path, case):
    version, zarr_format, options, chunks, shards = CASES[case]
    rng = np.random.default_rng(5)
    levels = [rng.normal(size=(2, 40, 24)).astype("f4"),
              rng.normal(size=(2, 20, 12)).astype("f4"),
              rng.normal(size=(2, 10, 6)).astype("f4")]
    path = str(tmp_path / "explicit.ome.zarr")
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    write_multiscale(levels, root, fmt=fmt_of(version), axes=AXES, storage_options=options,
                     scale={"c": 1.0, "y": 0.5, "x": 0.25}, name="explicit")

    g = cs.open_group(path, mode="r")
    ms = multiscales_of(g.attrs.asdict(), version)
    check_multiscales(ms, ["s0", "s1", "s2"],
                      [[1.0, 0.5, 0.25], [1.0, 1.0, 0.5], [1.0, 2.0, 1.0]], "explicit")
    for ds, expected in zip(ms["datasets"], levels):
        a = g[ds["path"]]
        assert a.dtype == np.dtype("f4") and a.shards == shards
        np.testing.assert_array_equal(a[...], expected)
        np.testing.assert_array_equal(a[:, ::3, 1::2], expected[:, ::3, 1::2])


# ---------------------------------------------------------------- chunkstore writes, ome-zarr-py reads

def write_pyramid_with_chunkstore(path, version, shards):
    """An NGFF image written with chunkstore only: arrays "0", "1", "2" and the group's
    multiscales metadata (top level in v0.4 on Zarr v2, under "ome" in v0.5 on Zarr v3)."""
    zarr_format = 2 if version == "0.4" else 3
    axes = [{"name": "c", "type": "channel"},
            {"name": "y", "type": "space", "unit": "micrometer"},
            {"name": "x", "type": "space", "unit": "micrometer"}]
    datasets = [{"path": str(i), "coordinateTransformations": [
        {"type": "scale", "scale": [1.0, 0.5 * 2 ** i, 0.5 * 2 ** i]},
        {"type": "translation", "translation": [0.0, 0.25 * (2 ** i - 1), 0.25 * (2 ** i - 1)]}]}
        for i in range(3)]
    ms = {"axes": axes, "datasets": datasets, "name": "from-chunkstore"}
    root = cs.open_group(path, mode="w", zarr_format=zarr_format)
    for i, level in enumerate(LEVELS):
        if zarr_format == 2:
            root.create_array(str(i), data=level, chunks=(1, 8, 8), dimension_separator="/")
        else:
            root.create_array(str(i), data=level, chunks=(1, 4, 4), shards=shards,
                              dimension_names=AXES)
    if version == "0.4":
        root.attrs["multiscales"] = [dict(ms, version="0.4")]
    else:
        root.attrs["ome"] = {"version": "0.5", "multiscales": [ms]}
    return datasets


@pytest.mark.parametrize("version,shards", [("0.4", None), ("0.5", None), ("0.5", (1, 16, 8))],
                         ids=["v0.4-zarr2", "v0.5-zarr3", "v0.5-zarr3-sharded"])
def test_ome_zarr_py_reads_a_pyramid_chunkstore_wrote(tmp_path, version, shards):
    path = str(tmp_path / "cs.ome.zarr")
    datasets = write_pyramid_with_chunkstore(path, version, shards)
    check_format_on_disk(path, 2 if version == "0.4" else 3)
    if shards:
        z = zarr.open_array(path, path="0", mode="r")
        assert z.shards == shards and z.chunks == (1, 4, 4)

    loc = parse_url(path)
    assert loc is not None and loc.exists()
    assert loc.version == version
    nodes = list(Reader(loc)())
    assert len(nodes) == 1
    node = nodes[0]
    assert any(isinstance(s, Multiscales) for s in node.specs)
    assert [a["name"] for a in node.metadata["axes"]] == AXES
    assert node.metadata["axes"][1]["unit"] == "micrometer"
    assert node.metadata["name"] == "from-chunkstore"
    got_ct = [[dict(sorted(t.items())) for t in ct]
              for ct in node.metadata["coordinateTransformations"]]
    assert got_ct == [[dict(sorted(t.items())) for t in d["coordinateTransformations"]]
                      for d in datasets]
    assert len(node.data) == 3
    for d, expected in zip(node.data, LEVELS):
        assert d.shape == expected.shape and d.dtype == expected.dtype
        np.testing.assert_array_equal(d.compute(), expected)
        np.testing.assert_array_equal(d[1, 2:13, 1:5].compute(), expected[1, 2:13, 1:5])


@pytest.mark.parametrize("version,shards", [("0.4", None), ("0.5", (1, 16, 8))],
                         ids=["v0.4-zarr2", "v0.5-zarr3-sharded"])
def test_ome_zarr_py_object_api_loads_a_pyramid_chunkstore_wrote(tmp_path, version, shards):
    """OMEZarrMultiscale.from_ome_zarr validates the metadata with ome-zarr-models."""
    from ome_zarr import OMEZarrMultiscale
    path = str(tmp_path / "cs.ome.zarr")
    write_pyramid_with_chunkstore(path, version, shards)
    m = OMEZarrMultiscale.from_ome_zarr(path)
    assert [a.name for a in m.metadata.axes] == AXES
    assert len(m.images) == 3
    for image, expected in zip(m.images, LEVELS):
        np.testing.assert_array_equal(np.asarray(image.data), expected)


# ---------------------------------------------------------------- ome-zarr-py on chunkstore as zarr

SWAPPED = textwrap.dedent("""
    import json, sys
    import numpy as np
    import chunkstore
    sys.modules["zarr"] = chunkstore        # what `import chunkstore as zarr` users do for libraries
    sys.modules["zarr.storage"] = chunkstore.storage   # (else imported twice, as a copy)
    # No patching of dask: its to_zarr reads chunkstore's version (< 3) as zarr-python 2's
    # and calls zarr.create with the create_array keywords ome-zarr-py gives it
    # (compressors=, chunk_key_encoding=, shards=, dimension_names=); create takes them.
    import zarr
    assert zarr is chunkstore
    from ome_zarr import OMEZarrMultiscale
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Reader
    from ome_zarr.scale import Methods
    from ome_zarr.writer import write_image

    path, version, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    options = {k: tuple(v) for k, v in options.items()}
    small = np.arange(2 * 16 * 12, dtype="u2").reshape(2, 16, 12) * 7 + 3
    image = np.kron(small, np.ones((1, 4, 4), dtype="u2"))
    levels = [image, np.kron(small, np.ones((1, 2, 2), dtype="u2")), small]
    fmt = FormatV04() if version == "0.4" else FormatV05()
    # a path: ome-zarr-py opens the group itself (zarr.open_group, then zarr.open "r+")
    write_image(image, path, scale_factors=(2, 4), method=Methods.NEAREST, fmt=fmt,
                axes="cyx", storage_options=options, name="swapped")

    nodes = list(Reader(parse_url(path))())
    assert len(nodes) == 1, nodes
    node = nodes[0]
    assert [a["name"] for a in node.metadata["axes"]] == ["c", "y", "x"]
    assert len(node.data) == 3
    for d, expected in zip(node.data, levels):
        np.testing.assert_array_equal(d.compute(), expected)
    m = OMEZarrMultiscale.from_ome_zarr(path)
    for im, expected in zip(m.images, levels):
        np.testing.assert_array_equal(np.asarray(im.data), expected)
    g = zarr.open_group(path, mode="r")
    print(json.dumps({"zarr_format": g.metadata.zarr_format,
                      "attrs": g.attrs.asdict(),
                      "chunks": g["s0"].chunks, "shards": g["s0"].shards}))
""")


def run_swapped(tmp_path, case):
    version, zarr_format, options, chunks, shards = CASES[case]
    script = tmp_path / "swapped.py"
    script.write_text(SWAPPED)
    path = str(tmp_path / "swapped.ome.zarr")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, str(script), path, version, json.dumps(options)],
                          capture_output=True, text=True, env=env, timeout=300)
    return proc, path


@pytest.mark.parametrize("case", list(CASES))
def test_ome_zarr_py_with_chunkstore_as_zarr(tmp_path, case):
    """ome-zarr-py's write_image, Reader and OMEZarrMultiscale driven by chunkstore as `zarr`;
    the result is then read by zarr-python here."""
    version, zarr_format, options, chunks, shards = CASES[case]
    proc, path = run_swapped(tmp_path, case)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["zarr_format"] == zarr_format
    assert tuple(out["chunks"]) == chunks
    assert (tuple(out["shards"]) if out["shards"] else None) == shards
    ms = multiscales_of(out["attrs"], version)
    check_multiscales(ms, ["s0", "s1", "s2"],
                      [[1.0, 1.0, 1.0], [1.0, 2.0, 2.0], [1.0, 4.0, 4.0]], "swapped")
    check_format_on_disk(path, zarr_format)
    for i, expected in enumerate(LEVELS):
        z = zarr.open_array(path, path=f"s{i}", mode="r")
        assert z.metadata.zarr_format == zarr_format and z.shards == shards
        np.testing.assert_array_equal(z[...], expected)
