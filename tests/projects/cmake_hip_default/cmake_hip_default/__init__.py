"""Built by CMake's HIP language for CMAKE_HIP_ARCHITECTURES' default (rocm_agent_enumerator)."""
