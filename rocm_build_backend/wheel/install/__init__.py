"""``rocm-build-backend install``: pip or uv with every wheel checked against the GPUs before it lands."""
