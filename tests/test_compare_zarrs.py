"""asv_bench/compare.py's zarrs column times zarrs' codec pipeline, never zarr-python's."""

import os
import sys

import numpy as np
import pytest

pytest.importorskip("zarr")
pytest.importorskip("zarrs")
pytest.importorskip("numcodecs")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "asv_bench"))
compare = pytest.importorskip("compare")


def test_zarrs_adapter_does_not_fall_back_to_zarr_python(tmp_path):
    ad = compare.ZarrsAdapter()
    data = np.arange(128 * 128, dtype="f4").reshape(128, 128)
    a = ad.create(str(tmp_path / "x"), data.shape, 32)
    ad.write_whole(a, data)
    a = ad.open(str(tmp_path / "x"))
    pipeline = a.async_array.codec_pipeline
    assert type(pipeline).__name__ == "ZarrsCodecPipeline" and pipeline.impl is not None
    assert pipeline.python_impl is None          # strict: no silent zarr-python fallback
    np.testing.assert_array_equal(ad.read_whole(a), data)
    rows, cols = np.array([1, 5, 70, 100]), np.array([3, 9, 64, 127])
    with pytest.raises(ad.unsupported):          # zarrs cannot: reported, not timed
        ad.oindex(a, rows, cols)
    # plain zarr-python in the same process is not affected
    b = compare.ZarrAdapter().open(str(tmp_path / "x"))
    assert type(b.async_array.codec_pipeline).__name__ == "BatchedCodecPipeline"
