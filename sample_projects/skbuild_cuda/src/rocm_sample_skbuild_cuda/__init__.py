"""A CUDA kernel from Python: ``add_one([1.0, 2.0])`` runs on the GPU."""

from ._kernels import add_one

__all__ = ["add_one"]
