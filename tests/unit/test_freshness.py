"""Build trees and output folders made for other GPU targets are found, refused or cleaned."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.errors import ConfigError, StaleBuildTreeError
from rocm_build_backend.builder.freshness import (
    FRESH_NAME,
    check_fresh,
    cmake_arch,
    find_build_trees,
    mark_fresh,
    read_fresh,
    stale_wheels,
)
from rocm_build_backend.wheel.stamp import make_stamp, rewrite_wheel
from helpers import write_file

CMAKE_CACHE = """\
# This is the CMakeCache file.
//Semicolon separated list of architectures
CMAKE_HIP_ARCHITECTURES:STRING={hip}
//GPU targets
GPU_TARGETS:STRING={gpu}
AMDGPU_TARGETS:STRING=
CMAKE_BUILD_TYPE:STRING=Release
"""


def cmake_tree(folder: Path, hip: str, gpu: str = "", source: Path | None = None) -> Path:
    """A CMake binary dir; ``source``: the source folder its cache names (CMAKE_HOME_DIRECTORY)."""
    write_file(folder / "CMakeFiles" / "x.o")
    home = f"CMAKE_HOME_DIRECTORY:INTERNAL={source}\n" if source else ""
    return write_file(folder / "CMakeCache.txt", CMAKE_CACHE.format(hip=hip, gpu=gpu) + home)


@pytest.fixture
def src(tmp_path) -> Path:
    root = tmp_path / "proj"
    write_file(root / "pyproject.toml")
    write_file(root / "pkg" / "__init__.py")
    return root


def test_find_build_trees(src, tmp_path):
    write_file(src / "build" / "lib" / "pkg" / "__init__.py")
    cache = cmake_tree(src / "build" / "temp.linux-x86_64-cpython-311" / "kernels", "gfx90a")
    write_file(src / "build" / "other" / "CMakeCache.txt", "CMAKE_BUILD_TYPE:STRING=Release\n")  # no arch: not listed
    sk = src / "_skbuild" / "linux-x86_64-3.11" / "cmake-build"
    sk_cache = cmake_tree(sk, "", gpu="gfx942")
    (src / "pkg.egg-info").mkdir()
    (src / "src" / "other.egg-info").mkdir(parents=True)
    outside = tmp_path / "skbuild-dir"
    outside_cache = cmake_tree(outside, "gfx1100", source=src)
    foreign = tmp_path / "someone-elses"  # outside the project, and nothing says it is ours
    cmake_tree(foreign, "gfx1100")
    trees = find_build_trees(src, extra=[outside, foreign, ".", src.parent, "does-not-exist"])
    assert trees == [
        src / "build",
        cache,
        src / "_skbuild",
        sk_cache,
        outside,
        outside_cache,
        src / "pkg.egg-info",
        src / "src" / "other.egg-info",
    ]


def test_nothing_to_find(src):
    assert find_build_trees(src) == []
    assert check_fresh(src, ["gfx942"]) == []
    assert mark_fresh(src, ["gfx942"]) == []


def test_cmake_arch_reads_only_set_variables(tmp_path):
    cache = write_file(tmp_path / "CMakeCache.txt", CMAKE_CACHE.format(hip="gfx942;gfx90a:xnack-", gpu=""))
    assert cmake_arch(cache) == {"CMAKE_HIP_ARCHITECTURES": ["gfx90a:xnack-", "gfx942"]}
    assert cmake_arch(tmp_path / "missing.txt") == {}


def test_stamped_tree_for_other_targets_is_refused_with_both_lists(src):
    write_file(src / "build" / "lib" / "pkg" / "_k.so")
    mark_fresh(src, ["gfx90a"])
    assert read_fresh(src / "build") == ["gfx90a"]
    assert check_fresh(src, ["gfx90a"]) == []
    with pytest.raises(StaleBuildTreeError) as exc:
        check_fresh(src, ["gfx942"])
    err = exc.value
    assert "build/ (built for gfx90a)" in err.message
    assert "this build is for gfx942" in err.message
    assert 'stale = "clean"' in err.hint and "ROCM_BUILD_BACKEND_STALE=clean" in err.hint
    assert "-C rocm-build-backend.stale=clean" in err.hint
    assert "rm -rf build/" in err.hint
    assert (src / "build" / "lib" / "pkg" / "_k.so").exists()  # "error" removes nothing


def test_clean_removes_exactly_the_stale_trees(src, tmp_path):
    write_file(src / "build" / "temp" / "k.o")
    (src / "pkg.egg-info").mkdir()
    skb = tmp_path / "skb"
    cmake_tree(skb, "gfx942")
    mark_fresh(src, ["gfx90a"])  # build/ now says gfx90a; egg-info is never stamped (sdists pack it)
    assert not list((src / "pkg.egg-info").iterdir())
    removed = check_fresh(src, ["gfx942"], stale="clean", extra=[skb])
    assert removed == [src / "build"]
    assert not (src / "build").exists() and (src / "pkg.egg-info").exists()
    assert skb.exists()  # unstamped, its CMake cache says gfx942: fresh
    assert (src / "pkg" / "__init__.py").exists() and (src / "pyproject.toml").exists()
    assert check_fresh(src, ["gfx942"], extra=[skb]) == []


@pytest.mark.parametrize(
    "hip,gpu,stale",
    [
        ("gfx90a", "", True),
        ("gfx942", "", False),
        ("gfx942;gfx90a", "", True),
        ("", "gfx90a", True),
        ("", "", True),  # no arch info, but compiled objects from an unknown build
    ],
)
def test_unstamped_cmake_trees(src, hip, gpu, stale):
    cmake_tree(src / "build" / "cp311", hip, gpu)
    if stale:
        with pytest.raises(StaleBuildTreeError, match="build/"):
            check_fresh(src, ["gfx942"])
    else:
        assert check_fresh(src, ["gfx942"]) == []


def test_unstamped_trees_without_objects_are_fresh(src):
    write_file(src / "build" / "lib" / "pkg" / "__init__.py")
    write_file(src / "build" / "bdist.linux-x86_64" / "wheel" / "pkg" / "__init__.py")
    (src / "pkg.egg-info").mkdir()
    write_file(src / "pkg.egg-info" / "SOURCES.txt")
    assert check_fresh(src, ["gfx942"]) == []


def test_unstamped_tree_with_objects_is_stale_and_not_ours_to_remove(src):
    obj = write_file(src / "build" / "temp.linux-x86_64-cpython-311" / "pkg" / "kernels.o")
    with pytest.raises(StaleBuildTreeError, match="unknown targets") as exc:
        check_fresh(src, ["gfx942"])
    assert "rm -rf" not in exc.value.hint and "nothing proves" in exc.value.hint
    with pytest.raises(StaleBuildTreeError, match="unknown targets") as exc:
        check_fresh(src, ["gfx942"], stale="clean")
    assert "not removed" in exc.value.hint
    assert obj.exists()


def test_a_cmake_tree_configured_for_this_source_is_ours_to_clean(src):
    cmake_tree(src / "build" / "temp" / "kernels", "gfx90a", source=src)
    assert check_fresh(src, ["gfx942"], stale="clean") == [src / "build"]
    assert not (src / "build").exists()


def test_a_cmake_tree_configured_for_another_source_is_not_ours(src, tmp_path):
    cache = cmake_tree(src / "build" / "temp" / "kernels", "gfx90a", source=tmp_path / "other-project")
    with pytest.raises(StaleBuildTreeError, match="nothing proves"):
        check_fresh(src, ["gfx942"], stale="clean")
    assert cache.exists()


def test_a_build_dir_outside_the_project_is_followed_only_when_the_backend_made_it(src, tmp_path):
    """A user's folder named as build-dir: never reported, never removed, never stamped."""
    users = tmp_path / "my-work"
    keep = write_file(users / "precious.o", "mine")
    write_file(users / "notes.txt", "mine too")
    assert check_fresh(src, ["gfx942"], stale="clean", extra=[users]) == []
    assert check_fresh(src, ["gfx942"], extra=[users]) == []
    assert mark_fresh(src, ["gfx942"], extra=[users]) == []
    assert keep.exists() and not (users / FRESH_NAME).exists()
    # the backend's own build dir out there: its CMake cache names this source folder
    made = tmp_path / "skb"
    cmake_tree(made, "gfx90a", source=src)
    with pytest.raises(StaleBuildTreeError) as exc:
        check_fresh(src, ["gfx942"], extra=[users, made])
    assert str(made) in exc.value.message and str(users) not in exc.value.message + exc.value.hint
    assert check_fresh(src, ["gfx942"], stale="clean", extra=[users, made]) == [made]
    assert not made.exists() and keep.exists()


def test_mark_fresh_leaves_a_folder_that_was_not_ours(src):
    """A build/ of the user's that existed before the build is never stamped (it would become ours)."""
    from rocm_build_backend.builder.freshness import existing_trees

    write_file(src / "build" / "scripts" / "make.sh")
    before = existing_trees(src)
    assert before == [src / "build"]
    assert mark_fresh(src, ["gfx942"], skip=before) == []
    write_file(src / "build" / "k.o")
    with pytest.raises(StaleBuildTreeError):
        check_fresh(src, ["gfx90a"], stale="clean")
    assert (src / "build" / "scripts" / "make.sh").exists()


def test_stamp_is_trusted_over_a_cmake_default(src):
    # hip-config fills AMDGPU_TARGETS with its default list when a project does not use it.
    cmake_tree(src / "build" / "cp311", "gfx942", gpu="gfx900;gfx906;gfx908;gfx90a")
    mark_fresh(src, ["gfx942"])
    assert check_fresh(src, ["gfx942"]) == []


def test_target_order_and_spelling_do_not_matter(src):
    write_file(src / "build" / "x.o")
    mark_fresh(src, ["gfx942", "GFX90A"])
    assert check_fresh(src, ["gfx90a;gfx942"]) == []
    assert check_fresh(src, ["gfx942", "gfx90a", "gfx942"]) == []
    with pytest.raises(StaleBuildTreeError):
        check_fresh(src, ["gfx90a:xnack-", "gfx942"])


def test_a_symlinked_build_dir_is_unlinked_not_followed(src, tmp_path):
    real = tmp_path / "elsewhere"
    write_file(real / "k.o")
    (src / "build").symlink_to(real, target_is_directory=True)
    with pytest.raises(StaleBuildTreeError, match="nothing proves"):  # not ours: left alone
        check_fresh(src, ["gfx942"], stale="clean")
    mark_fresh(src, ["gfx90a"])
    assert check_fresh(src, ["gfx942"], stale="clean") == [src / "build"]
    assert not (src / "build").exists() and (real / "k.o").exists()


def test_the_source_folder_is_never_a_tree(src):
    write_file(src / "k.o")
    assert check_fresh(src, ["gfx942"], stale="clean", extra=[".", src, src.parent]) == []
    assert (src / "pyproject.toml").exists()


def test_bad_stale_value(src):
    with pytest.raises(ConfigError, match="'error' or 'clean'"):
        check_fresh(src, ["gfx942"], stale="yes")


def test_mark_fresh_writes_valid_json_atomically(src, tmp_path):
    (src / "build").mkdir()
    extra = src / "bdir"
    extra.mkdir()
    written = mark_fresh(src, ["gfx942"], extra=[extra])
    assert written == [src / "build" / FRESH_NAME, extra / FRESH_NAME]
    for path in written:
        assert json.loads(path.read_text())["targets"] == ["gfx942"]
    assert sorted(p.name for p in (src / "build").iterdir()) == [FRESH_NAME]


def test_mark_fresh_skips_trees_it_cannot_write(src, monkeypatch):
    import rocm_build_backend.builder.freshness as freshness

    (src / "build").mkdir()

    def refuse(a, b):
        raise PermissionError(13, "Permission denied", str(b))

    monkeypatch.setattr(freshness.os, "replace", refuse)
    assert mark_fresh(src, ["gfx942"]) == []
    assert list((src / "build").iterdir()) == []  # no temporary file left behind


def test_unreadable_or_damaged_tree_stamp_counts_as_no_stamp(src):
    write_file(src / "build" / FRESH_NAME, "{damaged")
    write_file(src / "build" / "k.o")
    with pytest.raises(StaleBuildTreeError):
        check_fresh(src, ["gfx942"])


def make_wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal valid wheel, written by hand."""
    import base64
    import hashlib

    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}")
    rows.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in files.items():
            zf.writestr(member, data)
    return path


def stamp_for(targets):
    return make_stamp(requested=targets, source="settings", audit_files={}, host_gpus=[], toolchain={}, version="0.1.0")


def test_stale_wheels_in_the_output_folder(tmp_path):
    out = tmp_path / "dist"
    out.mkdir()
    old = rewrite_wheel(make_wheel(out, "a", "1.0"), stamp=stamp_for(["gfx90a"]))
    same = rewrite_wheel(make_wheel(out, "b", "1.0"), stamp=stamp_for(["gfx942"]))
    make_wheel(out, "c", "1.0")  # not stamped: not ours, not reported
    (out / "d-1.0-py3-none-any.whl").write_bytes(b"garbage")
    assert same.exists()
    assert stale_wheels(out, ["gfx942"]) == [(old, ["gfx90a"])]
    assert stale_wheels(out, ["gfx90a"]) == [(same, ["gfx942"])]
    assert stale_wheels(tmp_path / "missing", ["gfx942"]) == []


def test_nested_stale_trees_are_named_and_removed_once(src):
    """scikit-build-core's build-dir inside setuptools' build/: both stale, one removal."""
    write_file(src / "build" / "cmake" / "k.o")
    mark_fresh(src, ["gfx90a"], extra=[src / "build" / "cmake"])
    with pytest.raises(StaleBuildTreeError) as exc:
        check_fresh(src, ["gfx940"], extra=[src / "build" / "cmake"])
    assert "build/ (built for gfx90a)" in exc.value.message and "build/cmake" not in exc.value.message
    assert check_fresh(src, ["gfx940"], stale="clean", extra=[src / "build" / "cmake"]) == [src / "build"]
    assert not (src / "build").exists()
