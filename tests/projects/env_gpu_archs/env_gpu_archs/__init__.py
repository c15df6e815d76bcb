"""Built for the targets in GPU_ARCHS (';'-separated), as flash-attention and aiter read them."""
