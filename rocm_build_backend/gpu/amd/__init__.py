"""AMD ROCm as a GPU vendor: target names, loader rules, detection probes and their hints.

    vendor.py     the object the vendor registry finds (``AMD``)
    names.py      target ID grammar, sort order, KFD ``gfx_target_version`` decoding
    loader.py     does code for X load on Y (the HIP runtime's rules)
    detection.py  the probes in order and how their devices become build targets
    kfd.py        probe: KFD sysfs topology
    rocminfo.py   parser: rocminfo
    tools.py      parsers: rocm_agent_enumerator, amdgpu-arch, rocm-smi
    amdsmi.py     parser: amd-smi static (text, --json) and amd-smi list
    programs.py   running the probe programs under a time limit
    devices.py    target, kind (dGPU/APU) and product facts for a device a probe saw
    output.py     tool output as text: cleaning, first lines, error codes
    overrides.py  HSA_OVERRIDE_GFX_VERSION
    selection.py  visibility variables and the dGPU/APU choice
    causes.py     why nothing was found, and the hints
    detect.py     the earlier import path of the public detection names

Importing this package imports nothing else.
"""
