"""A PyTorch C++/CUDA extension: ``add_one(torch.ones(4, device="cuda"))``."""

import torch  # noqa: F401 - loads libtorch before the extension

from ._C import add_one

__all__ = ["add_one"]
