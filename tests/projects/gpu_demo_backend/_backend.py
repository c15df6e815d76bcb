"""In-tree PEP 517 backend: builds gpu-demo with the device code FAKE_GPU_BUILD names."""
import base64
import hashlib
import io
import json
import os
import tarfile
import zipfile

NAME, VERSION, DIST = "gpu-demo", "1.0", "gpu_demo"
HERE = os.path.dirname(os.path.abspath(__file__))
BUILDS = {
    "gfx90a": ("hip_two_tu_cov4.so", ["gfx908", "gfx90a"], ["gfx90a"]),
    "fat": ("hip_gfx90a_gfx942_cov5.so", ["gfx90a", "gfx942"], ["gfx90a", "gfx942"]),
}
METADATA = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n\n".encode()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    which = os.environ.get("FAKE_GPU_BUILD", "gfx90a")
    lib, targets, complete = BUILDS[which]
    di = f"{DIST}-{VERSION}.dist-info"
    with open(os.path.join(HERE, "bin", lib), "rb") as fh:
        so = fh.read()
    stamp = {
        "schema_version": 1,
        "generator": {"name": "rocm-build-backend", "version": "0.1.0"},
        "requested": {"targets": complete, "source": "settings"},
        "audit": {"targets": targets, "complete": complete,
                  "files": {f"{DIST}/_k.so": {"targets": targets, "complete": complete}}},
        "host": {"gpus": []},
        "toolchain": {"compiler": "hipcc", "version": None, "hip_version": None, "rocm_version": None},
    }
    files = {
        f"{DIST}/__init__.py": f"BUILT = {which!r}\n".encode(),
        f"{DIST}/_k.so": so,
        f"{di}/METADATA": METADATA,
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n",
        f"{di}/rocm_build.json": json.dumps(stamp, indent=2).encode(),
    }
    files[f"{di}/RECORD"] = ("\n".join([_line(n, d) for n, d in files.items()] + [f"{di}/RECORD,,"]) + "\n").encode()
    name = f"{DIST}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tf:
        for rel in ["pyproject.toml", "_backend.py"] + [f"bin/{b}" for b in sorted(os.listdir(os.path.join(HERE, "bin")))]:
            tf.add(os.path.join(HERE, rel), f"{base}/{rel}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        pkg_info = b"Metadata-Version: 2.1\nName: gpu-demo\nVersion: 1.0\n"
        info.size = len(pkg_info)
        tf.addfile(info, io.BytesIO(pkg_info))
    return name
