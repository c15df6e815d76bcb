"""The switch corpus: real GPU sdists (pinned in tests/real_sdists*.json) and an answer key written
from their sources, and the score of what ``plan`` turns on against it (recall and precision, for
an NVIDIA and an AMD target). Used by tests/integration/test_switch_corpus.py and
bench/bench_switch_corpus.py.

The key, per project: for each vendor the project builds for, the switches that turn its GPU
build on (file, line, name, the value that does it), and the switches that must be left alone
(another API, the other vendor's build, vendored code, a switch that drops the CPU build or
skips the GPU code). A switch counts as turned on when the plan gives it the key's value: applied
by the switch reader, or set by the project's profile (the plan says which). A switch is wrong
when the plan applies it and the key does not list it for that vendor, or lists it as one to
leave alone.

Read from the sources (each line checked by the test to name the switch):

- llama-cpp-python: ggml's options GGML_CUDA / GGML_HIP (vendor/llama.cpp: vendored code, set by
  the llama-cpp-python profile, not by the reader); GGML_VULKAN, GGML_SYCL, GGML_OPENCL left alone.
- flash-attn: BUILD_TARGET (cuda / rocm) and FLASH_ATTENTION_FORCE_BUILD (else a prebuilt wheel is
  downloaded); FLASH_ATTENTION_SKIP_CUDA_BUILD and FLASH_ATTENTION_TRITON_AMD_ENABLE (the Triton
  backend instead of the compiled one) left alone.
- xformers: FORCE_CUDA (gates its CUDAExtension, which a ROCm torch hipifies).
- deepspeed: DS_BUILD_OPS=1 builds the ops ahead of time (its op builders make the CUDAExtensions
  outside setup.py: the reader cannot see what it gates, a known miss).
- vllm: VLLM_TARGET_DEVICE (cuda / rocm).
- amd-aiter (AMD only): PREBUILD_KERNELS=1 and BUILD_TARGET=rocm.
- causal-conv1d, mamba-ssm: *_FORCE_BUILD (else a prebuilt wheel); *_SKIP_CUDA_BUILD left alone.
- torch-scatter, torch-cluster, torch-sparse, torch-spline-conv: FORCE_CUDA; FORCE_ONLY_CUDA
  (drops the CPU extension the package loads on a machine without a GPU) and FORCE_ONLY_CPU left alone.
- ctransformers (NVIDIA only): CT_CUBLAS, read by setup.py and passed to CMake's option.
- auto-gptq: BUILD_CUDA_EXT is on by default: nothing to turn on.
- lightgbm (NVIDIA only): USE_CUDA (enable_language(CUDA)); USE_GPU (OpenCL and Boost.Compute)
  and __INTEGRATE_OPENCL left alone.
- mmcv 1.7.2: MMCV_WITH_OPS (named like no switch: found by what it gates) and FORCE_CUDA;
  FORCE_MLU (Cambricon's MLU) left alone.
- natten (NVIDIA only): FORCE_CUDA / NATTEN_WITH_CUDA (pass -DNATTEN_WITH_CUDA=1 to its CMake).
- gsplat: builds its CUDA code by default: nothing to turn on; BUILD_NO_CUDA left alone.
- pywhispercpp: whisper.cpp's ggml options sit in a subproject with its own project(): never
  applied (GGML_CUDA, GGML_HIP left alone).
"""

from __future__ import annotations

import shlex
from typing import Any

NV, AMD = "nvidia", "amd"
TARGETS = {NV: "sm_90", AMD: "gfx942"}

#: (name, version) -> {"vendors": {vendor: [(file, line, name, value), ...]}, "leave": [names]}
KEY: dict[tuple[str, str], dict[str, Any]] = {
    ("llama-cpp-python", "0.3.16"): {
        "vendors": {
            NV: [("vendor/llama.cpp/ggml/CMakeLists.txt", 157, "GGML_CUDA", "ON")],
            AMD: [("vendor/llama.cpp/ggml/CMakeLists.txt", 173, "GGML_HIP", "ON")],
        },
        "leave": ["GGML_VULKAN", "GGML_SYCL", "GGML_OPENCL"],
    },
    ("flash-attn", "2.8.3.post2"): {
        "vendors": {
            NV: [("setup.py", 40, "BUILD_TARGET", "cuda"), ("setup.py", 61, "FLASH_ATTENTION_FORCE_BUILD", "TRUE")],
            AMD: [("setup.py", 40, "BUILD_TARGET", "rocm"), ("setup.py", 61, "FLASH_ATTENTION_FORCE_BUILD", "TRUE")],
        },
        "leave": ["FLASH_ATTENTION_SKIP_CUDA_BUILD", "FLASH_ATTENTION_TRITON_AMD_ENABLE"],
    },
    ("xformers", "0.0.35"): {
        "vendors": {NV: [("setup.py", 214, "FORCE_CUDA", "1")], AMD: [("setup.py", 214, "FORCE_CUDA", "1")]},
        "leave": [],
    },
    ("deepspeed", "0.19.8"): {
        "vendors": {NV: [("setup.py", 129, "DS_BUILD_OPS", "1")], AMD: [("setup.py", 129, "DS_BUILD_OPS", "1")]},
        "leave": [],
    },
    ("vllm", "0.33.0"): {
        "vendors": {
            NV: [("setup.py", 110, "VLLM_TARGET_DEVICE", "cuda")],
            AMD: [("setup.py", 110, "VLLM_TARGET_DEVICE", "rocm")],
        },
        "leave": [],
    },
    ("amd-aiter", "0.1.7.post2.dev18"): {
        "vendors": {AMD: [("setup.py", 21, "BUILD_TARGET", "rocm"), ("setup.py", 36, "PREBUILD_KERNELS", "1")]},
        "leave": [],
    },
    ("causal-conv1d", "1.7.0"): {
        "vendors": {v: [("setup.py", 43, "CAUSAL_CONV1D_FORCE_BUILD", "TRUE")] for v in (NV, AMD)},
        "leave": ["CAUSAL_CONV1D_SKIP_CUDA_BUILD"],
    },
    ("causal-conv1d", "1.6.0"): {
        "vendors": {v: [("setup.py", 43, "CAUSAL_CONV1D_FORCE_BUILD", "TRUE")] for v in (NV, AMD)},
        "leave": ["CAUSAL_CONV1D_SKIP_CUDA_BUILD"],
    },
    ("mamba-ssm", "2.3.2.post1"): {
        "vendors": {v: [("setup.py", 41, "MAMBA_FORCE_BUILD", "TRUE")] for v in (NV, AMD)},
        "leave": ["MAMBA_SKIP_CUDA_BUILD"],
    },
    ("torch-scatter", "2.1.2"): {
        "vendors": {v: [("setup.py", 21, "FORCE_CUDA", "1")] for v in (NV, AMD)},
        "leave": ["FORCE_ONLY_CUDA", "FORCE_ONLY_CPU"],
    },
    ("torch-cluster", "1.6.3"): {
        "vendors": {v: [("setup.py", 22, "FORCE_CUDA", "1")] for v in (NV, AMD)},
        "leave": ["FORCE_ONLY_CUDA", "FORCE_ONLY_CPU"],
    },
    ("ctransformers", "0.2.9"): {"vendors": {NV: [("setup.py", 11, "CT_CUBLAS", "1")]}, "leave": []},
    ("auto-gptq", "0.7.1"): {"vendors": {NV: [], AMD: []}, "leave": []},
    ("lightgbm", "4.6.0"): {
        "vendors": {NV: [("CMakeLists.txt", 6, "USE_CUDA", "ON")]},
        "leave": ["USE_GPU", "__INTEGRATE_OPENCL", "USE_MPI"],
    },
    ("mmcv", "1.7.2"): {
        "vendors": {
            v: [("setup.py", 200, "MMCV_WITH_OPS", "1"), ("setup.py", 292, "FORCE_CUDA", "1")] for v in (NV, AMD)
        },
        "leave": ["FORCE_MLU"],
    },
    ("torch-sparse", "0.6.18"): {
        "vendors": {v: [("setup.py", 25, "FORCE_CUDA", "1")] for v in (NV, AMD)},
        "leave": ["FORCE_ONLY_CUDA", "FORCE_ONLY_CPU"],
    },
    ("torch-spline-conv", "1.2.2"): {
        "vendors": {v: [("setup.py", 22, "FORCE_CUDA", "1")] for v in (NV, AMD)},
        "leave": ["FORCE_ONLY_CUDA", "FORCE_ONLY_CPU"],
    },
    ("natten", "0.17.5"): {
        "vendors": {NV: [("setup.py", 54, "FORCE_CUDA", "1"), ("setup.py", 54, "NATTEN_WITH_CUDA", "1")]},
        "leave": [],
    },
    ("gsplat", "1.5.3"): {"vendors": {NV: [], AMD: []}, "leave": ["BUILD_NO_CUDA"]},
    ("pywhispercpp", "1.3.3"): {"vendors": {NV: [], AMD: []}, "leave": ["GGML_CUDA", "GGML_HIP"]},
}


def given(plan: dict[str, Any], name: str) -> str | None:
    """The value ``plan --json`` gives a switch: an environment variable, a ``-C cmake.define``, a
    ``-D`` in ``CMAKE_ARGS``."""
    for key in (f"cmake.define.{name}", f"skbuild.cmake.define.{name}"):
        if key in plan["config_settings"]:
            return str(plan["config_settings"][key])
    for word in reversed(shlex.split(plan["env"].get("CMAKE_ARGS", ""))):
        for prefix in (f"-D{name}=", f"-D{name}:BOOL="):
            if word.startswith(prefix):
                return word[len(prefix) :]
    return plan["env"].get(name)


def score(project: tuple[str, str], vendor: str, plan: dict[str, Any]) -> dict[str, Any]:
    """What the plan turned on against the key, for one project and vendor."""
    key = KEY[project]
    expected = key["vendors"][vendor]
    found, missed = [], []
    for file, line, name, value in expected:
        value_given = given(plan, name)
        listed = any(s["file"] == file and s["line"] == line and s["name"] == name for s in plan["switches"])
        (found if listed and value_given is not None and value_given.upper() == value.upper() else missed).append(name)
    right_names = {name for _, _, name, _ in expected} - set(key["leave"])
    applied = [s for s in plan["switches"] if s.get("applied")]
    wrong = [f"{s['name']} ({s['file']} L{s['line']}: {s['applied']})" for s in applied if s["name"] not in right_names]
    touched = [
        f"{name}={given(plan, name)}"
        for name in key["leave"]
        if (given(plan, name) or "0").upper() not in ("0", "OFF", "FALSE", "NO", "")
    ]
    return {
        "expected": len(expected),
        "found": found,
        "missed": missed,
        "applied": len(applied),
        "wrong": wrong,
        "touched": touched,
    }


def totals(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Recall (expected switches the plan turns on) and precision (applied switches that are right)."""
    expected = sum(r["expected"] for r in rows)
    found = sum(len(r["found"]) for r in rows)
    applied = sum(r["applied"] for r in rows)
    wrong = sum(len(r["wrong"]) for r in rows)
    return {
        "expected": expected,
        "found": found,
        "recall": found / expected if expected else 1.0,
        "applied": applied,
        "wrong": wrong,
        "touched": sum(len(r["touched"]) for r in rows),
        "precision": (applied - wrong) / applied if applied else 1.0,
    }


def plan_all(trees: dict[tuple[str, str], Any]) -> list[dict[str, Any]]:
    """``plan`` (in this process, as ``plan --json`` computes it) of every project of the key for
    both vendors' targets, scored: one row per project and vendor the key lists."""
    from rocm_build_backend.builder.project import plan_json, plan_project

    rows = []
    for project, key in KEY.items():
        for vendor in key["vendors"]:
            settings = {"rocm-build-backend.targets": TARGETS[vendor], "rocm-build-backend.compiler-check": "false"}
            prepared, stale = plan_project(trees[project], settings)
            data = plan_json(prepared, stale)
            rows.append(
                {
                    "project": f"{project[0]} {project[1]}",
                    "vendor": vendor,
                    "targets": TARGETS[vendor],
                    **score(project, vendor, data),
                    "lines": [
                        f"{s['file']} L{s['line']} {s['name']}: {s['action']}: {s['detail']}"
                        for s in data["switches"]
                        if s["role"] in ("gpu-on", "prebuilt")
                    ],
                }
            )
    return rows


def main() -> None:
    """Plan and score the whole corpus; print the rows and the totals per vendor as JSON. The
    sdists come through pip's configured index into the test cache (``realinputs.sdist_tree``)."""
    import json
    from realinputs import MORE_PINS, load_pins, sdist_tree

    pins = {(p["name"], p["version"]): p for p in load_pins() + load_pins(MORE_PINS)}
    trees = {project: sdist_tree(pins[project]) for project in KEY}
    rows = plan_all(trees)
    by_vendor = {v: totals([r for r in rows if r["vendor"] == v]) for v in (NV, AMD)}
    print(json.dumps({"rows": rows, "totals": by_vendor, "all": totals(rows)}, indent=1))


if __name__ == "__main__":
    main()
