"""zarr-python 3's face: create_array and hierarchy creation, the Group/Array API, data
types and the metadata view."""
