"""Built for every GPU rocm_agent_enumerator lists, gfx000 skipped, as PyTorch's CMake does."""
