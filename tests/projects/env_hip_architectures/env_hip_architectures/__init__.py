"""Built for the targets in HIP_ARCHITECTURES (space-separated), as xformers reads them."""
