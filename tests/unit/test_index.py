"""The per-target static index: page contents, names, hashes, incremental runs, concurrent runs and
the state file. Installing from it with real pip and uv: tests/integration/test_index_installs.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocm_build_backend.cli import render
from rocm_build_backend.wheel.index import run as I
from rocm_build_backend.errors import ConfigError, RocmBuildBackendError
from helpers import anchors, inconsistencies, index_fleet, INDEX_TARGETS, make_wheel, ROOT, TESTS

BIN = TESTS / "data" / "index"


def test_pages(tmp_path):
    wheels = tmp_path / "wheels"
    index_fleet(wheels)
    out = tmp_path / "out"
    result = I.build_index(wheels, out)
    assert set(INDEX_TARGETS) <= set(result.indexes)
    assert result.exit_code == 0
    root = anchors(out / "gfx90a/simple/index.html")
    assert root.meta["pypi:repository-version"] == "1.1"
    hrefs = [a["href"] for a, _ in root.anchors]
    assert hrefs == sorted(hrefs) and {"fat-pkg/", "pure/", "single/"} <= set(hrefs)
    page = anchors(out / "gfx90a/simple/pure/index.html")
    got = {text: attrs for attrs, text in page.anchors}
    assert set(got) == {"pure-1.0-py3-none-any.whl", "pure-2.0-py3-none-any.whl", "pure-3.0-py3-none-any.whl"}
    attrs = got["pure-2.0-py3-none-any.whl"]
    wheel_bytes = (wheels / "pure-2.0-py3-none-any.whl").read_bytes()
    href, frag = attrs["href"].split("#")
    assert frag == "sha256=" + hashlib.sha256(wheel_bytes).hexdigest()
    assert attrs["data-requires-python"] == ">=3.8"
    assert 'data-requires-python="&gt;=3.8"' in (out / "gfx90a/simple/pure/index.html").read_text()
    assert 'data-requires-python="&gt;=4"' in (out / "gfx90a/simple/pure/index.html").read_text()
    # the link resolves to the wheel, and its .metadata sidecar is the wheel's METADATA
    target = (out / "gfx90a/simple/pure" / href).resolve()
    assert target.read_bytes() == wheel_bytes
    sidecar = Path(str(target) + ".metadata").read_bytes()
    with zipfile.ZipFile(target) as zf:
        assert sidecar == zf.read("pure-2.0.dist-info/METADATA")
    assert (
        attrs["data-core-metadata"]
        == attrs["data-dist-info-metadata"]
        == "sha256=" + hashlib.sha256(sidecar).hexdigest()
    )
    # local versions: + is %2B in the link, as written in the text
    single = anchors(out / "gfx942/simple/single/index.html").anchors
    assert [t for _, t in single] == ["single-1.0+gfx942-py3-none-any.whl"]
    assert "single-1.0%2Bgfx942-py3-none-any.whl" in single[0][0]["href"]
    # PEP 691 JSON beside the HTML
    doc = json.loads((out / "gfx942/simple/fat-pkg/index.json").read_text())
    assert doc["meta"]["api-version"] == "1.1" and doc["name"] == "fat-pkg"
    assert doc["versions"] == ["1.0", "2.0"]
    f = doc["files"][0]
    assert f["hashes"]["sha256"] and f["size"] == (wheels / f["filename"]).stat().st_size
    assert f["core-metadata"] == f["dist-info-metadata"]
    rootdoc = json.loads((out / "gfx942/simple/index.json").read_text())
    assert {p["name"] for p in rootdoc["projects"]} >= {"fat-pkg", "pure", "single"}
    # gfx1100 gets fat-pkg 1.0 only
    fat = [t for _, t in anchors(out / "gfx1100/simple/fat-pkg/index.html").anchors]
    assert fat == ["fat_pkg-1.0-py3-none-any.whl"]


def test_names_are_normalized_and_everything_escaped(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "Odd.Name_Pkg", "1.0", dist="Odd_Name_Pkg", requires_python=">=3.8,!=3.9.*,<4\"&'")
    out = tmp_path / "out"
    I.build_index(wheels, out, targets=["gfx90a"])
    page = out / "gfx90a/simple/odd-name-pkg/index.html"
    assert page.is_file()
    text = page.read_text()
    assert '<4"&' not in text and "&lt;4&quot;&amp;&#x27;" in text
    ((attrs, _),) = anchors(page).anchors
    assert attrs["data-requires-python"] == ">=3.8,!=3.9.*,<4\"&'"
    doc = json.loads((out / "gfx90a/simple/odd-name-pkg/index.json").read_text())
    assert doc["files"][0]["requires-python"] == ">=3.8,!=3.9.*,<4\"&'"
    assert json.loads((out / "gfx90a/simple/index.json").read_text())["projects"] == [{"name": "Odd.Name_Pkg"}]
    assert I.normalize("Foo.Bar__baz") == "foo-bar-baz"


def test_incremental(tmp_path):
    wheels = tmp_path / "wheels"
    index_fleet(wheels)
    out = tmp_path / "out"
    first = I.build_index(wheels, out)
    assert first.read == len(list(wheels.glob("*.whl")))
    again = I.build_index(wheels, out)
    assert again.pages_written == [] and again.files_written == [] and again.read == 0
    assert again.reused == first.read
    # a new version of one project: only that project's pages, in the indexes it loads on
    make_wheel(wheels, "fat-pkg", "3.0", device={"fat_pkg/_k.so": ["gfx942"]})
    third = I.build_index(wheels, out)
    assert third.read == 1
    assert sorted(third.pages_written) == ["gfx942/simple/fat-pkg/index.html", "gfx942/simple/fat-pkg/index.json"]
    hosted = hosted_path(out, wheels / "fat_pkg-3.0-py3-none-any.whl").relative_to(out).as_posix()
    assert sorted(third.files_written) == [hosted, hosted + ".metadata"]
    # a new project also changes the root pages
    make_wheel(wheels, "newcomer", "0.1", device={"newcomer/_k.so": ["gfx1100"]})
    fourth = I.build_index(wheels, out)
    assert sorted(fourth.pages_written) == [
        "gfx1100/simple/index.html",
        "gfx1100/simple/index.json",
        "gfx1100/simple/newcomer/index.html",
        "gfx1100/simple/newcomer/index.json",
    ]
    # a rebuilt wheel (same name, new bytes) is read again
    make_wheel(wheels, "newcomer", "0.1", device={"newcomer/_k.so": ["gfx1100"], "newcomer/_j.so": ["gfx1100"]})
    os.utime(wheels / "newcomer-0.1-py3-none-any.whl", ns=(1, 1))
    fifth = I.build_index(wheels, out)
    assert fifth.read == 1 and fifth.pages_written == [
        "gfx1100/simple/newcomer/index.html",
        "gfx1100/simple/newcomer/index.json",
    ]
    # a removed wheel leaves the pages and its copy; a project left empty loses its pages
    hosted = hosted_path(out, wheels / "newcomer-0.1-py3-none-any.whl")
    assert hosted.is_file()
    (wheels / "newcomer-0.1-py3-none-any.whl").unlink()
    sixth = I.build_index(wheels, out)
    assert "gfx1100/simple/newcomer/index.html" in sixth.removed
    assert hosted.relative_to(out).as_posix() in sixth.removed
    assert not (out / "gfx1100/simple/newcomer").exists()
    assert not hosted.exists() and not hosted.parent.exists()
    assert "newcomer" not in (out / "gfx1100/simple/index.html").read_text()
    # no temporary files anywhere
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp") or p.name.endswith(".lnk")]


def test_pages_replaced_atomically(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    page = out / "gfx90a/simple/pkg/index.html"
    before = page.read_bytes()
    make_wheel(wheels, "pkg", "2.0", device={"pkg/_k.so": ["gfx90a"]})

    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst).endswith("index.html"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(RocmBuildBackendError) as err:  # one error line, not a traceback
        I.build_index(wheels, out)
    monkeypatch.undo()
    assert "No space left on device" in err.value.message and err.value.hint
    assert page.read_bytes() == before  # the old page, whole
    assert not [p for p in out.rglob("*.tmp")]
    after = I.build_index(wheels, out)
    assert "gfx90a/simple/pkg/index.html" in after.pages_written
    assert "pkg-2.0" in page.read_text()


def test_state_file_damaged_is_rebuilt(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    (out / I.DB_NAME).write_bytes(b"{ not a database" * 100)
    result = I.build_index(wheels, out)
    assert result.read == 1 and result.pages_written == []
    assert any("state file is damaged" in w for w in result.warnings)
    assert (out / (I.DB_NAME + ".damaged")).is_file()  # set aside, not lost
    assert I.build_index(wheels, out).warnings == []


def test_targets_family_and_base_url(tmp_path):
    wheels = tmp_path / "wheels"
    index_fleet(wheels)
    make_wheel(wheels, "navi", "1.0", device={"navi/_k.so": ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]})
    out = tmp_path / "limited"
    result = I.build_index(wheels, out, targets="gfx942")
    assert list(result.indexes) == ["gfx942"]
    assert not (out / "gfx90a").exists()

    fam = I.build_index(wheels, tmp_path / "fam", family=True)
    assert "gfx94X-dcgpu" in fam.indexes and "gfx110X-all" in fam.indexes
    assert "single-1.0+gfx942-py3-none-any.whl" in fam.indexes["gfx94X-dcgpu"]
    # a family index lists only wheels that load on every member
    assert "navi-1.0-py3-none-any.whl" in fam.indexes["gfx110X-all"]
    assert "fat_pkg-1.0-py3-none-any.whl" not in fam.indexes["gfx110X-all"]
    assert "pure-2.0-py3-none-any.whl" in fam.indexes["gfx110X-all"]
    assert (tmp_path / "fam/gfx110X-all/simple/navi/index.html").is_file()
    named = I.build_index(wheels, tmp_path / "fam2", family=True, targets=["gfx110X-all", "gfx942"])
    assert list(named.indexes) == ["gfx94X-dcgpu", "gfx110X-all"]
    assert I.family_of("gfx1031") == "gfx1031"

    cdn = I.build_index(wheels, tmp_path / "cdn", targets=["gfx90a"], base_url="https://cdn.example.com/whl/")
    ((attrs, _),) = anchors(tmp_path / "cdn/gfx90a/simple/single/index.html").anchors
    assert attrs["href"].startswith("https://cdn.example.com/whl/single-1.0%2Bgfx90a-py3-none-any.whl#sha256=")
    assert not (tmp_path / "cdn/files/single-1.0+gfx90a-py3-none-any.whl").exists()
    assert (tmp_path / "cdn/files/single-1.0+gfx90a-py3-none-any.whl.metadata").is_file()
    assert cdn.metadata_upload == tmp_path / "cdn/files"

    with pytest.raises(RocmBuildBackendError) as err:
        I.build_index(wheels, tmp_path / "bad", targets=["gfx9422"])
    assert "gfx942" in str(err.value)
    with pytest.raises(ConfigError) as err:
        I.build_index(wheels, tmp_path / "bad", targets=["gfx94Y-dcgpu"], family=True)
    assert "gfx94X-dcgpu" in err.value.hint
    with pytest.raises(RocmBuildBackendError):
        I.build_index(wheels, tmp_path / "bad", base_url='https://x/"><script>')
    with pytest.raises(RocmBuildBackendError):
        I.build_index(tmp_path / "missing", tmp_path / "bad")


def test_wheels_inside_the_output_are_linked_in_place(tmp_path):
    out = tmp_path / "out"
    wheels = out / "packages"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    I.build_index(wheels, out)
    ((attrs, _),) = anchors(out / "gfx90a/simple/pkg/index.html").anchors
    assert attrs["href"].startswith("../../../packages/pkg-1.0-py3-none-any.whl#")
    assert (wheels / "pkg-1.0-py3-none-any.whl.metadata").is_file()
    assert not (out / "files").exists()


def test_generic_code_and_pure_only(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "gen", "1.0", device={"gen/_k.so": ["gfx11-generic"]})
    result = I.build_index(wheels, tmp_path / "out")
    assert {"gfx1100", "gfx1151"} <= set(result.indexes)
    assert "gfx90a" not in result.indexes
    old = I.build_index(wheels, tmp_path / "old", targets=["gfx1100"], generic_ok=False)
    assert old.indexes["gfx1100"] == [] and old.warnings
    pure = tmp_path / "pure"
    make_wheel(pure, "pure", "1.0")
    with pytest.raises(ConfigError) as err:
        I.build_index(pure, tmp_path / "out2")
    assert "--targets" in err.value.hint
    assert I.build_index(pure, tmp_path / "out2", targets="gfx90a,gfx942").indexes == {
        "gfx90a": ["pure-1.0-py3-none-any.whl"],
        "gfx942": ["pure-1.0-py3-none-any.whl"],
    }


def test_bad_wheels_are_skipped_not_fatal(tmp_path):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "good", "1.0", device={"good/_k.so": ["gfx90a"]})
    (wheels / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    (wheels / "not_a_wheel_name.whl").write_bytes(b"x")
    liar = make_wheel(tmp_path / "x", "other", "1.0")
    shutil.copy(liar, wheels / "claims-1.0-py3-none-any.whl")
    result = I.build_index(wheels, tmp_path / "out")
    assert set(result.skipped) == {"broken-1.0-py3-none-any.whl", "not_a_wheel_name.whl", "claims-1.0-py3-none-any.whl"}
    assert result.exit_code == 1
    assert result.indexes == {"gfx90a": ["good-1.0-py3-none-any.whl"]}
    assert not (tmp_path / "out/files/broken-1.0-py3-none-any.whl").exists()
    assert not (tmp_path / "out/files/claims-1.0-py3-none-any.whl").exists()
    text = render.index(result)
    assert "skipped broken-1.0-py3-none-any.whl" in text
    assert result.to_json()["skipped"]


def hosted_path(out: Path, wheel: Path) -> Path:
    """Where the index hosts a copy of ``wheel``: OUT/files/<sha256[:16]>/<name>."""
    return out / "files" / hashlib.sha256(wheel.read_bytes()).hexdigest()[:16] / wheel.name


def test_hosted_wheels_are_copies_a_rebuild_in_place_cannot_change(tmp_path):
    wheels = tmp_path / "wheels"
    src = make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    original = src.read_bytes()
    I.build_index(wheels, tmp_path / "out")
    hosted = hosted_path(tmp_path / "out", src)
    assert hosted.read_bytes() == original and not os.path.samefile(hosted, src)
    ((attrs, _),) = anchors(tmp_path / "out/gfx90a/simple/pkg/index.html").anchors
    assert attrs["href"].endswith("#sha256=" + hashlib.sha256(original).hexdigest())
    again = I.build_index(wheels, tmp_path / "out")
    assert again.read == 0 and again.files_written == []
    # the build tool writes the same file again, in place (zipfile truncates the same inode)
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"], "pkg/_j.so": ["gfx90a"]})
    assert hosted.read_bytes() == original


def test_replacing_a_wheel_keeps_every_moment_consistent(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    I.build_index(wheels, out)
    assert inconsistencies(out) == []
    # the same file name, new bytes (a rebuild), and a new METADATA
    make_wheel(wheels, "pkg", "1.0", device={"pkg/_k.so": ["gfx90a"], "pkg/_j.so": ["gfx90a"]}, requires_python=">=3.8")
    seen = []
    real_replace, real_unlink = os.replace, os.unlink

    def replacing(src, dst, **kw):  # a client reading the index before and after every change
        seen.extend(inconsistencies(out))
        real_replace(src, dst, **kw)
        seen.extend(inconsistencies(out))

    def unlinking(path, **kw):
        seen.extend(inconsistencies(out))
        real_unlink(path, **kw)
        seen.extend(inconsistencies(out))

    monkeypatch.setattr(os, "replace", replacing)
    monkeypatch.setattr(os, "unlink", unlinking)
    result = I.build_index(wheels, out)
    assert "gfx90a/simple/pkg/index.html" in result.pages_written
    assert seen == []
    assert inconsistencies(out) == []
    # the old copy is gone once no page links to it
    assert [p for p in (out / "files").rglob("*.whl")] == [
        out
        / "files"
        / hashlib.sha256((wheels / "pkg-1.0-py3-none-any.whl").read_bytes()).hexdigest()[:16]
        / "pkg-1.0-py3-none-any.whl"
    ]


CONCURRENT = """\
import sys
from pathlib import Path
from rocm_build_backend.wheel.index.run import build_index
for _ in range(int(sys.argv[3])):
    build_index(Path(sys.argv[1]), Path(sys.argv[2]))
"""


def test_concurrent_runs_into_one_folder_stay_consistent(tmp_path):
    wheels = tmp_path / "wheels"
    for i in range(6):
        make_wheel(wheels, f"p{i}", "1.0", device={f"p{i}/_k.so": [INDEX_TARGETS[i % 3]]})
    out = tmp_path / "out"
    script = tmp_path / "run.py"
    script.write_text(CONCURRENT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(wheels), str(out), "3"], env=env, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    for round_ in range(3):  # wheels replaced and added while the runs go on
        make_wheel(wheels, "p0", "1.0", device={"p0/_k.so": ["gfx90a"], f"p0/_r{round_}.so": ["gfx90a"]})
        make_wheel(wheels, f"new{round_}", "1.0", device={f"new{round_}/_k.so": ["gfx942"]})
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    assert inconsistencies(out) == []
    final = I.build_index(wheels, out)
    assert inconsistencies(out) == [] and final.skipped == {}
    assert sorted(final.indexes["gfx942"]) == sorted(
        ["p1-1.0-py3-none-any.whl", "p4-1.0-py3-none-any.whl"] + [f"new{r}-1.0-py3-none-any.whl" for r in range(3)]
    )
    assert not [p for p in out.rglob("*") if p.name.endswith((".tmp", ".lnk"))]
