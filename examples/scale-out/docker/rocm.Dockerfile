# The build image of the AMD jobs: manylinux_2_28 (AlmaLinux 8) with ROCm's HIP compiler, device
# libraries and runtime headers, for cibuildwheel (CIBW_MANYLINUX_X86_64_IMAGE). The workflow's
# images job builds it when this file changes (the tag holds its hash) and pushes it to your
# registry. The build arguments name your sources; docs/scale-out.md says which.
#   BASE         PyPA's manylinux_2_28_x86_64 image (or your mirror of it)
#   ROCM_REPO    the base URL of AMD's ROCm packages for RHEL 8 of ROCM_VERSION
#   ROCM_GPGKEY  the URL of the key those packages are signed with
ARG BASE
FROM ${BASE}
ARG ROCM_VERSION=6.4
ARG ROCM_REPO
ARG ROCM_GPGKEY
RUN test -n "${ROCM_REPO}" && test -n "${ROCM_GPGKEY}" \
 && printf '[rocm]\nname=ROCm %s\nbaseurl=%s\nenabled=1\ngpgcheck=1\ngpgkey=%s\n' \
        "${ROCM_VERSION}" "${ROCM_REPO}" "${ROCM_GPGKEY}" > /etc/yum.repos.d/rocm.repo \
 && dnf install -y rocm-hip-sdk \
 && dnf clean all
ENV ROCM_PATH=/opt/rocm \
    HIP_PLATFORM=amd \
    PATH=/opt/rocm/bin:${PATH}
# what the shim checks targets with: hipcc and the device libraries of this ROCm
RUN hipcc --version
