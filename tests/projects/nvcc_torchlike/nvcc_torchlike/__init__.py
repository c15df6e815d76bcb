"""A CUDA extension built like torch.utils.cpp_extension builds one."""
