"""Benchmark and proof for ``thin``: the real cupy-rocm-7-0 wheel (and a generated >= 1 GB
wheel), thinned, measured against the floor, and read back by LLVM's own tools.

    python bench/bench_thin.py [--targets gfx942,gfx90a] [--generated-gb 1.0] [--no-generated]
                               [--nvidia sm_90,sm_80] [--no-amd] [--cache DIR] [--out FILE]

- The real wheel is cupy-rocm-7-0 14.2.0 (CPython 3.11, manylinux2014 x86_64), downloaded
  once into the cache folder (default ``~/.cache/rocm-build-backend-bench``) through pip's
  configured index, and checked against its pinned size and sha256 (below).
- ``floor``: inflate every member and deflate it again (``zipfile``, level 6, streamed),
  the least any wheel rewrite costs; ``thin``: ``thin_wheel`` to one target. Each runs in a
  fresh child process; the table gives seconds, the ratio to the floor and peak RSS.
- Each target twice: ``--keep-layout`` (device code rewritten in place) and the default
  (thinned libraries compacted: the freed bytes cut from the file, addresses unchanged).
- Proof, for every thinned library: ``clang-offload-bundler --list`` on each bundle of its
  ``.hip_fatbin`` lists only the kept targets and the host; ``--unbundle`` of each kept
  target gives the same bytes as from the original; ``llvm-readelf -a`` reports no error or
  warning; in place, ``llvm-readelf -h -l -S -s --dyn-syms`` prints the same as for the
  original and every byte outside the device section is unchanged; compacted, the symbols and
  every section's name, type, address and flags are the same (what a program sees in memory);
  ``llvm-objdump --offloading`` runs cleanly (LLVM 19 lists only ``.llvm.offloading`` images,
  so it prints none for ``.hip_fatbin``); our audit of the thinned wheel finds exactly the kept
  targets and no problem.
- ``--nvidia``: cupy-cuda13x 14.2.0 too (pinned the same way), checked with NVIDIA's
  ``cuobjdump`` (``$CUOBJDUMP``; PyPI's ``nvidia-cuda-cuobjdump`` ships one): it lists only the
  kept SASS/PTX entries, ``-xelf``/``-xptx`` give the same bytes as from the original, bytes
  outside ``.nv_fatbin`` and the ELF layout are unchanged.
- Sizes: the wheel and its installed size (sum of member sizes) before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# pinned by name, version, file name, size and sha256; found through pip's configured index
CUPY = {
    "name": "cupy-rocm-7-0",
    "version": "14.2.0",
    "filename": "cupy_rocm_7_0-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
    "size": 73485746,
    "sha256": "8e824c1c2fc386e72fe8ae69ab7c273326b17650160400f8f4ea2c932189ed1a",
}
CUDA13 = {
    "name": "cupy-cuda13x",
    "version": "14.2.0",
    "filename": "cupy_cuda13x-14.2.0-cp311-cp311-manylinux2014_x86_64.whl",
    "size": 69969199,
    "sha256": "f94843e54500a9c8c169135f79572bfaba946efe4f7178e834c227280c1b0c12",
}
CUOBJDUMP = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
TOOLS = {
    k: shutil.which(f"{k}-19") or shutil.which(k)
    for k in ("clang-offload-bundler", "llvm-objcopy", "llvm-objdump", "llvm-readelf")
}


# ------------------------------------------------------------------ inputs


def fetch_cupy(cache: Path, pin: dict = CUPY) -> Path:
    """The pinned wheel, downloaded once through pip's configured index (``tests/realinputs.py``)
    and checked against the pin's size and sha256."""
    sys.path.insert(0, str(ROOT / "tests"))
    from realinputs import CorpusError, pinned_file

    try:
        return pinned_file(pin, cache)
    except CorpusError as exc:
        raise SystemExit(str(exc)) from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def generated(path: Path, size_gb: float) -> Path:
    """bench_audit's generated wheel (libraries with bundles, CCOBs and fatbins, host code,
    filler), plus the WHEEL and RECORD a wheel needs."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_audit

    bench_audit.generate(path, size_gb)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n")
        zf.writestr("demo-1.0.dist-info/RECORD", b"")
    final = path.with_name("demo-1.0-py3-none-any.whl")
    os.replace(path, final)
    return final


# ------------------------------------------------------------------ children


def _peak_rss() -> int:
    """This process's own peak RSS (VmHWM; ru_maxrss would include the parent's before exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(mode: str, wheel: str, out: str, targets: str) -> None:
    start = time.perf_counter()
    if mode == "floor":
        with (
            zipfile.ZipFile(wheel) as zin,
            zipfile.ZipFile(Path(out) / "floor.whl", "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zout,
        ):
            for info in zin.infolist():
                zi = zipfile.ZipInfo(info.filename, info.date_time)
                zi.compress_type, zi.file_size, zi.external_attr = (
                    zipfile.ZIP_DEFLATED,
                    info.file_size,
                    info.external_attr,
                )
                with zin.open(info) as r, zout.open(zi, "w", force_zip64=info.file_size > zipfile.ZIP64_LIMIT) as w:
                    while chunk := r.read(1 << 20):
                        w.write(chunk)
    else:
        from rocm_build_backend.gpu.targets import parse_targets
        from rocm_build_backend.wheel.thin.run import thin_wheel

        thin_wheel(wheel, parse_targets(targets), out, keep_layout=mode == "thin-in-place")
    print(json.dumps({"seconds": time.perf_counter() - start, "rss": _peak_rss()}))


def run_child(mode: str, wheel: Path, out: Path, targets: str = "") -> dict:
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(wheel), str(out), targets],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if r.returncode:
        raise SystemExit(f"{mode} failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ proof


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd)


def _bundle_slices(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each bundle in a .hip_fatbin section's bytes, by our reader."""
    from rocm_build_backend.binary.elf import BytesSource
    from rocm_build_backend.binary.walk import walk_hip_fatbin

    containers, _p = walk_hip_fatbin(BytesSource(data))
    starts = [c.offset for c in containers] + [len(data)]
    return list(zip(starts, starts[1:]))


def _section(data: bytes, name: str) -> tuple[int, int] | None:
    from rocm_build_backend.binary import elf

    src = elf.BytesSource(data)
    secs = elf.read_sections(src, elf.read_header(src), lambda n, t: n == name).sections
    return (secs[0].offset, secs[0].size) if secs else None


def _memory_layout(path: str, work: Path) -> tuple[str, list[tuple[str, ...]]]:
    """(symbols, [(section, type, address, flags)]): what a program sees in memory, which thinning
    (in place or compacted) must leave as it was."""
    symbols = _run([TOOLS["llvm-readelf"], "-s", "--dyn-syms", path], work).stdout.replace(path, "")
    rows = []
    for line in _run([TOOLS["llvm-readelf"], "-S", "-W", path], work).stdout.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 7 and f[0].startswith("[") and f[0][1:-1].isdigit():
            rows.append((f[1], f[2], f[3], f[7] if len(f) > 10 else ""))
    return symbols, rows


def _common_checks(old: bytes, new: bytes, work: Path, sec_name: str) -> list[str]:
    """Outside the device section: unchanged bytes (in place), or the same memory (compacted)."""
    problems = []
    off, size = _section(old, sec_name) or (0, 0)
    if len(new) == len(old):
        if old[:off] != new[:off] or old[off + size :] != new[off + size :]:
            problems.append(f"bytes outside {sec_name} changed")
        layouts = [
            _run([TOOLS["llvm-readelf"], "-h", "-l", "-S", "-s", "--dyn-syms", f], work).stdout.replace(f, "")
            for f in ("old.so", "new.so")
        ]
        if layouts[0] != layouts[1]:
            problems.append("llvm-readelf: headers, sections or symbols differ from the original")
    elif _memory_layout("old.so", work) != _memory_layout("new.so", work):
        problems.append("llvm-readelf: sections or symbols are not where they were in memory")
    r = _run([TOOLS["llvm-readelf"], "-a", "new.so"], work)
    if r.returncode or "error" in r.stderr.lower() or "warning" in r.stderr.lower():
        problems.append(f"llvm-readelf -a: {r.stderr.strip()[:200]}")
    return problems


def prove_member(old: bytes, new: bytes, work: Path, kept: set[str]) -> list[str]:
    """Problems found by LLVM's tools and byte comparisons; [] when the thinned file is right."""
    (work / "old.so").write_bytes(old)
    (work / "new.so").write_bytes(new)
    if _section(old, ".hip_fatbin") is None:
        return ["no .hip_fatbin"]
    problems = _common_checks(old, new, work, ".hip_fatbin")
    (o_off, o_size), (n_off, n_size) = _section(old, ".hip_fatbin"), _section(new, ".hip_fatbin")
    old_fb, new_fb = old[o_off : o_off + o_size], new[n_off : n_off + n_size]
    old_slices, new_slices = _bundle_slices(old_fb), _bundle_slices(new_fb)
    if len(old_slices) != len(new_slices):
        problems.append(f"{len(old_slices)} bundles before, {len(new_slices)} after")
    for i, ((s, e), (os_, oe)) in enumerate(zip(new_slices, old_slices)):
        (work / "new.fb").write_bytes(new_fb[s:e])
        (work / "old.fb").write_bytes(old_fb[os_:oe])
        r = _run([TOOLS["clang-offload-bundler"], "--list", "--type=o", "--input=new.fb"], work)
        ids = r.stdout.split()
        devices = {i.split("--", 1)[1] for i in ids if not i.startswith("host-")}
        if r.returncode or devices != kept or sum(i.startswith("host-") for i in ids) != 1:
            problems.append(f"bundle {i}: bundler lists {ids} ({r.stderr.strip()})")
        for ident in ids:
            if ident.startswith("host-"):
                continue
            outs = []
            for which in ("old", "new"):
                r = _run(
                    [
                        TOOLS["clang-offload-bundler"],
                        "--unbundle",
                        "--type=o",
                        f"--input={which}.fb",
                        f"--targets={ident}",
                        f"--output={which}.co",
                    ],
                    work,
                )
                outs.append((work / f"{which}.co").read_bytes() if r.returncode == 0 else None)
            if outs[0] is None or outs[0] != outs[1]:
                problems.append(f"bundle {i}: {ident} is not byte-identical after thinning")
    r = _run([TOOLS["llvm-objdump"], "--offloading", "new.so"], work)
    if r.returncode:
        problems.append(f"llvm-objdump --offloading: {r.stderr.strip()[:200]}")
    return problems


def _cuobjdump_files(so: Path, work: Path, tag: str) -> dict[str, bytes]:
    """arch -> bytes of each cubin / PTX file cuobjdump extracts (named by its arch)."""
    out = work / tag
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for flag in ("-xelf", "-xptx"):
        _run([CUOBJDUMP, flag, "all", str(so)], out)
    files: dict[str, bytes] = {}
    for f in sorted(out.iterdir()):
        arch = f.name.split(".")[-2]  # cub.3.sm_86.cubin -> sm_86
        files[f"{arch}{f.suffix}"] = f.read_bytes()
    return files


def prove_member_nv(old: bytes, new: bytes, work: Path, kept: set[str]) -> list[str]:
    """NVIDIA's cuobjdump lists and extracts only the kept entries, byte-identical."""
    problems: list[str] = []
    (work / "old.so").write_bytes(old)
    (work / "new.so").write_bytes(new)
    if _section(old, ".nv_fatbin") is None:
        return ["no .nv_fatbin"]
    problems += _common_checks(old, new, work, ".nv_fatbin")
    listed = _run([CUOBJDUMP, "--list-elf", "--list-ptx", "new.so"], work).stdout
    archs = {line.rsplit(".", 2)[-2] for line in listed.splitlines() if line.startswith(("ELF file", "PTX file"))}
    want = {t.replace("compute_", "sm_").rstrip("af") for t in kept}
    if archs != want:
        problems.append(f"cuobjdump lists {sorted(archs)}, expected {sorted(want)}")
    before, after = _cuobjdump_files(work / "old.so", work, "x_old"), _cuobjdump_files(work / "new.so", work, "x_new")
    for name, data in after.items():
        if before.get(name) != data:
            problems.append(f"{name} is not byte-identical after thinning")
    return problems


def prove(src: Path, dst: Path, targets: set[str]) -> list[str]:
    """Run ``prove_member`` on every library thinned in ``dst``; also our audit."""
    from rocm_build_backend.binary.audit import audit_wheel

    lines = []
    report = audit_wheel(dst)
    found = set(report.targets)
    lines.append(f"  audit of the thinned wheel: targets {sorted(found)}, ok={report.ok}")
    if not report.ok or not found <= targets:
        lines.append("  PROBLEM: the audit does not agree")
    with zipfile.ZipFile(src) as zs, zipfile.ZipFile(dst) as zd, tempfile.TemporaryDirectory() as tmp:
        for f in report.device_files:
            nvidia = any(t.startswith(("sm_", "compute_")) for t in f.targets)
            if nvidia and not CUOBJDUMP:
                lines.append(f"  {f.path}: not checked by NVIDIA's tool (set CUOBJDUMP)")
                continue
            check = prove_member_nv if nvidia else prove_member
            problems = check(zs.read(f.path), zd.read(f.path), Path(tmp), set(f.targets))
            verdict = "ok" if not problems else "PROBLEMS: " + "; ".join(problems)
            tool = "cuobjdump" if nvidia else "bundler"
            old, new = zs.getinfo(f.path).file_size, zd.getinfo(f.path).file_size
            layout = "layout identical" if old == new else "same memory layout, file cut"
            lines.append(
                f"  {f.path}: {tool} lists {', '.join(f.targets)}{'' if nvidia else ' + host'}; kept "
                f"code byte-identical; readelf clean; {layout} ({old / 2**20:.1f} -> {new / 2**20:.1f} MiB)"
                f" -> {verdict}"
            )
    return lines


def sizes(path: Path) -> tuple[int, int]:
    with zipfile.ZipFile(path) as zf:
        return path.stat().st_size, sum(i.file_size for i in zf.infolist())


# ------------------------------------------------------------------ main


def bench_one(label: str, wheel: Path, targets: list[str], work: Path, do_prove: bool) -> list[str]:
    lines = [f"== {label}: {wheel.name}"]
    w0, i0 = sizes(wheel)
    floor = run_child("floor", wheel, work / "floor")
    lines.append(
        f"  floor (inflate + deflate every member): {floor['seconds']:.1f} s, peak RSS {floor['rss'] >> 20} MiB"
    )
    for t in targets:
        for mode, what in (("thin-in-place", "--keep-layout"), ("thin", "(compacted)")):
            out = work / t
            res = run_child(mode, wheel, out, t)
            dst = out / wheel.name
            w1, i1 = sizes(dst)
            lines.append(
                f"  thin --targets {t} {what}: {res['seconds']:.1f} s = {res['seconds'] / floor['seconds']:.2f}x "
                f"floor, peak RSS {res['rss'] >> 20} MiB"
            )
            lines.append(
                f"    wheel {w0 / 2**20:.1f} MiB -> {w1 / 2**20:.1f} MiB ({100 * w1 / w0:.0f} %); "
                f"installed {i0 / 2**20:.1f} MiB -> {i1 / 2**20:.1f} MiB ({100 * i1 / i0:.0f} %)"
            )
            if do_prove:
                lines.extend(prove(wheel, dst, {t}))
            shutil.rmtree(out)
    return lines


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:6])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="gfx942,gfx90a")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/rocm-build-backend-bench"))
    ap.add_argument("--generated-gb", type=float, default=1.0)
    ap.add_argument("--no-generated", action="store_true")
    ap.add_argument("--no-amd", action="store_true", help="leave out the cupy-rocm wheel")
    ap.add_argument(
        "--nvidia",
        default="",
        metavar="TARGETS",
        help="also thin cupy-cuda13x to these targets (sm_90,sm_80); cuobjdump from $CUOBJDUMP checks it",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "results_thin.txt"))
    args = ap.parse_args()
    missing = [k for k, v in TOOLS.items() if not v]
    if missing:
        raise SystemExit(f"missing LLVM tools: {', '.join(missing)}")
    targets = args.targets.split(",")
    lines = [
        f"bench_thin.py on {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}"
    ]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.no_amd:
            lines += bench_one(
                "cupy-rocm-7-0 14.2.0 (real, PyPI, sha256 pinned)", fetch_cupy(Path(args.cache)), targets, work, True
            )
        if args.nvidia:
            cuda = fetch_cupy(Path(args.cache), CUDA13)
            lines += bench_one(
                "cupy-cuda13x 14.2.0 (real, PyPI, sha256 pinned)", cuda, args.nvidia.split(","), work, True
            )
        if not args.no_generated:
            big = generated(work / "gen.whl", args.generated_gb)
            lines += bench_one(
                f"generated {args.generated_gb:g} GB wheel (bench_audit's generator)", big, [targets[0]], work, False
            )
    text = "\n".join(lines) + "\n"
    print(text, end="")
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
