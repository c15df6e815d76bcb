# The build image of the NVIDIA jobs: manylinux_2_28 (AlmaLinux 8) with CUDA's nvcc and runtime
# headers, for cibuildwheel (CIBW_MANYLINUX_X86_64_IMAGE). The workflow's images job builds it
# when this file changes (the tag holds its hash) and pushes it to your registry.
#   BASE       PyPA's manylinux_2_28_x86_64 image (or your mirror of it)
#   CUDA_REPO  the URL of NVIDIA's CUDA repository file for RHEL 8 x86_64 (cuda-rhel8.repo)
ARG BASE
FROM ${BASE}
ARG CUDA_MAJOR=13
ARG CUDA_MINOR=0
ARG CUDA_REPO
RUN test -n "${CUDA_REPO}" \
 && dnf config-manager --add-repo "${CUDA_REPO}" \
 && dnf install -y "cuda-nvcc-${CUDA_MAJOR}-${CUDA_MINOR}" "cuda-cudart-devel-${CUDA_MAJOR}-${CUDA_MINOR}" \
 && dnf clean all
ENV CUDA_HOME=/usr/local/cuda-${CUDA_MAJOR}.${CUDA_MINOR} \
    PATH=/usr/local/cuda-${CUDA_MAJOR}.${CUDA_MINOR}/bin:${PATH}
# what the shim checks targets with
RUN nvcc --version
