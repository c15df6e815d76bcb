"""Benchmark: audit a generated wheel of >= 1 GB against just reading it, and against the
vendor tools run on extracted files.

    python bench/bench_audit.py [--size-gb 1.0] [--keep DIR]

Generates (into a temporary directory, deleted afterwards) a wheel of many ``.so`` files
whose ``.hip_fatbin`` holds uncompressed bundles and zstd CCOBs, whose ``.nv_fatbin`` holds
fatbins, plus host code and plain filler members (Python files, data). Then measures, each
in a fresh child process (so peak RSS is its own):

- ``read``: reading + inflating every member with ``zipfile`` (the floor for any reader);
- ``audit``: ``audit_wheel`` (checks every library's targets against what was generated);
- ``audit (tracemalloc)``: the same run under tracemalloc, for the Python heap peak;
- ``tools``: ``zipfile.extractall`` + for each library ``llvm-objcopy --dump-section
  .hip_fatbin`` + ``clang-offload-bundler --list`` (it reads only the first bundle of a
  section) + ``llvm-objdump --offloading``, and ``cuobjdump --list-elf --list-ptx`` where
  it is installed.

Prints a table of times, ratios to ``read`` and peak memory.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MACH = {"gfx908": 0x30, "gfx90a": 0x3F, "gfx942": 0x4C, "gfx1100": 0x41, "gfx1201": 0x4E}
AMD_SETS = [["gfx90a", "gfx942"], ["gfx908", "gfx90a", "gfx942"], ["gfx90a", "gfx942", "gfx1100", "gfx1201"]]
NV_SETS = [[(2, 80), (2, 90), (1, 90)], [(2, 75), (2, 80), (2, 86), (2, 90)]]
TOOLS = {
    "objcopy": ["llvm-objcopy-19", "llvm-objcopy"],
    "bundler": ["clang-offload-bundler-19", "clang-offload-bundler"],
    "objdump": ["llvm-objdump-19", "llvm-objdump"],
    "cuobjdump": ["cuobjdump"],
}


# ------------------------------------------------------------------ generating


class Filler:
    """Bytes that deflate about like machine code (~2.5x), made quickly."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        blocks = []
        for _ in range(256):
            rand = rng.randbytes(1024)
            blocks.append(rand + rand[: rng.randrange(256, 1024)] + bytes(rng.randrange(512, 1536)))
        self.pool = b"".join(blocks)
        self.rng = rng

    def take(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            start = self.rng.randrange(len(self.pool) // 2)
            out += self.pool[start : start + min(n - len(out), len(self.pool) - start)]
        return bytes(out)


def code_object(target: str, size: int, fill: Filler) -> bytes:
    ident = b"\x7fELF\x02\x01\x01\x40\x03" + bytes(7)  # ELF64 LE, OSABI HSA, code object v5
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, 224, 1, 0, 64, 0, MACH[target] | 0x500, 64, 56, 0, 64, 0, 0)
    return hdr + fill.take(size - len(hdr))


def bundle(targets: list[str], size: int, fill: Filler) -> bytes:
    ids = ["host-x86_64-unknown-linux--"] + [f"hipv4-amdgcn-amd-amdhsa--{t}" for t in targets]
    objs = [b""] + [code_object(t, size, fill) for t in targets]
    head = bytearray(b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids)))
    table_len = len(head) + sum(24 + len(i) for i in ids)
    pos = (table_len + 4095) // 4096 * 4096
    offsets = []
    for obj in objs:
        offsets.append(pos)
        pos = (pos + len(obj) + 4095) // 4096 * 4096
    for ident, obj, off in zip(ids, objs, offsets):
        head += struct.pack("<QQQ", off, len(obj), len(ident)) + ident.encode()
    out = bytearray(head)
    for obj, off in zip(objs, offsets):
        if obj:
            out += bytes(off - len(out)) + obj
    return bytes(out)


def ccob(raw: bytes) -> bytes:
    import hashlib

    from rocm_build_backend.binary.decompression import zstd_module

    payload = zstd_module().compress(raw, level=3)
    digest = struct.unpack("<Q", hashlib.md5(raw).digest()[:8])[0]
    return b"CCOB" + struct.pack("<HHIIQ", 2, 1, 24 + len(payload), len(raw), digest) + payload


def fatbin(entries, size: int, fill: Filler) -> bytes:
    body = bytearray()
    for kind, arch in entries:
        payload = fill.take(size)
        payload += bytes(-len(payload) % 8)
        body += struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(payload), 0, 0, 8, 1, arch, 0, 0, 0x11, 0, 0)
        body += payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def elf(sections) -> bytes:
    """A minimal ELF64 shared object: sections (name, data, align), table at the end."""
    out = bytearray(64)
    names = bytearray(b"\0")
    shdrs = [bytes(64)]
    for name, data, align in sections + [(".shstrtab", None, 1)]:
        name_off = len(names)
        names += name.encode() + b"\0"
        if data is None:
            data = bytes(names)
        out += bytes(-len(out) % align)
        off = len(out)
        out += data
        typ = 3 if name == ".shstrtab" else 1
        flags = 0 if name == ".shstrtab" else 2
        shdrs.append(struct.pack("<IIQQQQIIQQ", name_off, typ, flags, 0, off, len(data), 0, 0, align, 0))
    out += bytes(-len(out) % 8)
    shoff = len(out)
    out += b"".join(shdrs)
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    out[:64] = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, len(shdrs), len(shdrs) - 1
    )
    return bytes(out)


def library(i: int, scale: int, fill: Filler) -> tuple[bytes, list[str]]:
    """One library: host code, a .hip_fatbin with bundles and CCOBs, a .nv_fatbin."""
    rng = random.Random(i)
    amd = AMD_SETS[i % len(AMD_SETS)]
    nv = NV_SETS[i % len(NV_SETS)]
    parts = []
    for tu in range(6):
        raw = bundle(amd, rng.randrange(scale // 40, scale // 20), fill)
        parts.append(ccob(raw) if tu % 2 else raw)
    hip = b"".join(p + bytes(-len(p) % 4096) for p in parts)
    nvb = b"".join(fatbin(nv, rng.randrange(scale // 60, scale // 30), fill) for _ in range(4))
    text = fill.take(scale // 3)
    data = elf([(".text", text, 16), (".hip_fatbin", hip, 4096), (".nv_fatbin", nvb, 8)])
    targets = amd + [f"{'sm' if k == 2 else 'compute'}_{a}" for k, a in nv]
    return data, targets


def generate(path: Path, size_gb: float) -> dict[str, list[str]]:
    """Write the wheel; return member -> expected targets."""
    fill = Filler(1)
    expected: dict[str, list[str]] = {}
    target = int(size_gb * (1 << 30))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        i = 0
        while path.stat().st_size < target:
            scale = (96 << 20) if i % 10 == 0 else (24 << 20)  # a few big libraries, many smaller
            data, targets = library(i, scale, fill)
            name = f"demo/lib/libk{i:03d}.so"
            zf.writestr(name, data)
            expected[name] = targets
            for j in range(20):  # filler: Python files and data
                zf.writestr(f"demo/pkg{i:03d}/mod{j}.py", b"def f(x):\n    return x * 2\n" * (200 + 50 * j))
            zf.writestr(f"demo/data/table{i:03d}.bin", fill.take(4 << 20))
            zf.fp.flush()
            i += 1
        zf.writestr("demo-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    return expected


# ------------------------------------------------------------------ measuring (children)


def peak_rss() -> int:
    """This process's peak RSS: VmHWM where /proc has it (ru_maxrss can carry the parent's
    peak over fork + exec), else ru_maxrss."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def child(mode: str, wheel: str) -> None:
    t0 = time.perf_counter()
    out: dict = {}
    if mode == "read":
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                with zf.open(info) as f:
                    while f.read(1 << 20):
                        pass
    elif mode in ("audit", "audit-tracemalloc"):
        if mode == "audit-tracemalloc":
            import tracemalloc

            tracemalloc.start()
        from rocm_build_backend.binary.audit import audit_wheel

        report = audit_wheel(wheel)
        out["targets"] = {f.path: f.targets for f in report.device_files}
        out["ok"] = report.ok
        if mode == "audit-tracemalloc":
            out["heap_peak"] = tracemalloc.get_traced_memory()[1]
    out["seconds"] = time.perf_counter() - t0
    out["maxrss"] = peak_rss()
    print(json.dumps(out))


def run_child(mode: str, wheel: Path) -> dict:
    res = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(wheel)], capture_output=True, text=True, check=True
    )
    return json.loads(res.stdout)


def which(kind: str) -> str | None:
    for name in TOOLS[kind]:
        found = shutil.which(name)
        if found:
            return found
    return None


def run_tools(wheel: Path, work: Path) -> dict:
    """Extract, then list every library with the vendor tools; seconds per stage."""
    out: dict = {}
    t0 = time.perf_counter()
    dest = work / "x"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(dest)
    out["extract"] = time.perf_counter() - t0
    libs = sorted(dest.rglob("*.so"))
    objcopy, bundler, objdump, cuobjdump = (which(k) for k in ("objcopy", "bundler", "objdump", "cuobjdump"))
    listed = 0
    if objcopy and bundler:
        t0 = time.perf_counter()
        for lib in libs:
            sec = work / "hip.bin"
            subprocess.run(
                [objcopy, f"--dump-section=.hip_fatbin={sec}", str(lib), str(work / "null.o")],
                check=True,
                capture_output=True,
            )
            res = subprocess.run([bundler, "--list", "--type=o", f"--input={sec}"], capture_output=True, text=True)
            listed += res.stdout.count("amdgcn")
        out["bundler"] = time.perf_counter() - t0
        out["bundler_ids"] = listed
    if objdump:
        t0 = time.perf_counter()
        for lib in libs:
            subprocess.run([objdump, "--offloading", str(lib)], capture_output=True)
        out["objdump"] = time.perf_counter() - t0
    if cuobjdump:
        t0 = time.perf_counter()
        for lib in libs:
            subprocess.run([cuobjdump, "--list-elf", "--list-ptx", str(lib)], capture_output=True)
        out["cuobjdump"] = time.perf_counter() - t0
    out["libraries"] = len(libs)
    shutil.rmtree(dest)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--child", nargs=2, metavar=("MODE", "WHEEL"), help=argparse.SUPPRESS)
    ap.add_argument("--no-tools", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="rbb-bench-") as tmp:
        work = Path(tmp)
        wheel = work / "demo-1.0-cp311-cp311-linux_x86_64.whl"
        t0 = time.perf_counter()
        expected = generate(wheel, args.size_gb)
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
        usize = sum(i.file_size for i in infos)
        print(
            f"wheel: {wheel.stat().st_size / 2**30:.2f} GiB on disk, {usize / 2**30:.2f} GiB inflated, "
            f"{len(infos)} members, {len(expected)} libraries (generated in {time.perf_counter() - t0:.0f} s)"
        )
        read = run_child("read", wheel)
        aud = run_child("audit", wheel)
        heap = run_child("audit-tracemalloc", wheel)
        agree = sum(sorted(aud["targets"].get(k, [])) == sorted(v) for k, v in expected.items())
        print(f"audit agrees with the generated truth on {agree}/{len(expected)} libraries; ok={aud['ok']}")
        tools = {} if args.no_tools else run_tools(wheel, work)

    rows = [
        ("read + inflate all members (zipfile)", read["seconds"], read["maxrss"]),
        ("audit_wheel", aud["seconds"], aud["maxrss"]),
    ]
    if tools:
        rows.append(("extract all members (zipfile.extractall)", tools["extract"], None))
        if "bundler" in tools:
            rows.append(
                (
                    f"  + objcopy .hip_fatbin + clang-offload-bundler --list ({tools['libraries']} libs)",
                    tools["bundler"],
                    None,
                )
            )
        if "objdump" in tools:
            rows.append(("  + llvm-objdump --offloading", tools["objdump"], None))
        rows.append(("  + cuobjdump --list-elf --list-ptx", tools.get("cuobjdump"), None))
        total = tools["extract"] + tools.get("bundler", 0) + tools.get("objdump", 0) + tools.get("cuobjdump", 0)
        rows.append(("extract + tools, total", total, None))
    print()
    print(f"{'':<78} {'seconds':>8} {'x read':>7} {'peak RSS':>9}")
    for name, secs, rss in rows:
        s = f"{secs:8.2f}" if secs is not None else "     n/a"
        r = f"{secs / read['seconds']:7.2f}" if secs is not None else "    n/a"
        m = f"{rss / 2**20:7.0f}MB" if rss else ""
        print(f"{name:<78} {s} {r} {m:>9}")
    print(f"\naudit Python heap peak (tracemalloc run): {heap['heap_peak'] / 2**20:.1f} MB")
    if tools and "cuobjdump" not in tools:
        print("cuobjdump: not installed here")
    if tools.get("bundler_ids") is not None:
        print(
            f"clang-offload-bundler listed {tools['bundler_ids']} device ids "
            f"(first bundle of each .hip_fatbin only; CCOBs after it are not seen)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
