"""``index --add WHEEL... -o OUT`` and ``index --remove NAME==VERSION -o OUT``: publishing by
name, and what a run touches (only what changed). The build matrix publishing at once is in
``tests/integration/test_scale_out.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocm_build_backend.errors import ConfigError
from rocm_build_backend.wheel.index import run as I
from rocm_build_backend.wheel.index.publish import publish
from rocm_build_backend.wheel.index.store import Store
from helpers import ROOT, anchors, inconsistencies, make_wheel

TARGETS = ["gfx90a", "gfx942", "gfx1100"]


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocm_build_backend", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def listed(out: Path, index: str, project: str) -> list[str]:
    page = out / index / "simple" / project / "index.html"
    return [text for _attrs, text in anchors(page).anchors] if page.exists() else []


def snapshot(out: Path) -> dict[str, tuple[int, int]]:
    """Every file in OUT but the state: (inode, mtime) — what a run rewrote shows as a change."""
    return {
        p.relative_to(out).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in out.rglob("*")
        if p.is_file() and ".rocm-build-backend-index" not in p.name
    }


def test_add_and_remove_by_name(tmp_path):
    dist = tmp_path / "dist"
    a1 = make_wheel(dist, "alpha", "1.0", device={"alpha/_k.so": ["gfx90a"]})
    b1 = make_wheel(dist, "beta", "1.0", device={"beta/_k.so": ["gfx942"]})
    out = tmp_path / "out"
    proc = cli("index", "--add", a1, b1, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert listed(out, "gfx90a", "alpha") == [a1.name] and listed(out, "gfx942", "beta") == [b1.name]
    assert 'href="gfx90a/simple/"' in (out / "index.html").read_text()  # the output's page lists its indexes
    a2 = make_wheel(tmp_path / "dist2", "alpha", "2.0", device={"alpha/_k.so": ["gfx90a", "gfx942"]})
    before = snapshot(out)
    proc = cli("index", "--add", "--json", a2, "-o", out)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["wheels_added"] == [a2.name] and doc["wheels_read"] == 1
    assert listed(out, "gfx90a", "alpha") == [a1.name, a2.name] and listed(out, "gfx942", "alpha") == [a2.name]
    changed = {rel for rel, st in snapshot(out).items() if before.get(rel) != st}
    assert not any("beta" in rel for rel in changed), changed  # another project's pages are not rewritten
    assert "gfx90a/simple/index.html" not in changed  # no project came or went there
    # the same bytes again: nothing to do
    again = publish(out, add=[a2])
    assert again.written == [] and again.read == 0 and again.exit_code == 0
    # --remove: exactly that version; its hosted copy goes once no page links it
    hosted = out / "files" / doc["files_written"][0].split("/")[1] / a2.name
    assert hosted.is_file()
    proc = cli("index", "--remove", "alpha==2.0", "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert listed(out, "gfx90a", "alpha") == [a1.name] and listed(out, "gfx942", "alpha") == []
    assert not (out / "gfx942/simple/alpha").exists() and not hosted.exists()
    assert inconsistencies(out) == []
    proc = cli("index", "--remove", "alpha==9.9", "-o", out)
    assert proc.returncode == 1 and "holds no wheel of alpha 9.9" in proc.stdout


def test_add_and_remove_refuse_what_would_undo_them(tmp_path):
    dist = tmp_path / "dist"
    a1 = make_wheel(dist, "alpha", "1.0", device={"alpha/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    assert publish(out, add=[a1]).exit_code == 0
    for args, code, words in (
        (["index", dist, "-o", out], 2, "published with --add"),  # a mirror run would drop the published wheels
        (["index", "--add", "--targets", "gfx1100", a1, "-o", out], 2, "other --targets"),
        (["index", "--remove", "alpha-1.0", "-o", out], 2, "NAME==VERSION"),
        (["index", "--add", out], 2, "-o/--outdir"),
        (["index", "--add", "--split", a1, "-o", out], 2, "does not go with"),
        (["index", "--add", tmp_path / "missing.whl", "-o", out], 1, "no such file"),
    ):
        proc = cli(*args)
        assert proc.returncode == code, (args, proc.stdout, proc.stderr)
        assert words in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    mirror = tmp_path / "mirror"
    I.build_index(dist, mirror)
    proc = cli("index", "--add", a1, "-o", mirror)
    assert proc.returncode == 2 and "mirrors a folder" in proc.stderr
    with pytest.raises(ConfigError):
        publish(out)


def test_a_run_reads_only_the_rows_of_what_changed(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    for i in range(300):
        make_wheel(wheels, f"p{i:03d}", "1.0", device={f"p{i:03d}/_k.so": [TARGETS[i % 3]]})
    old = time.time() - 3600  # built an hour ago: not within the timestamp granularity of the run
    for p in wheels.iterdir():
        os.utime(p, (old, old))
    time.sleep(2.1)  # ctimes too
    out = tmp_path / "out"
    I.build_index(wheels, out)
    loaded: list[int] = []
    real_rows = Store.rows

    def rows(self, buckets=None):
        got = real_rows(self, buckets)
        loaded.append(len(got))
        return got

    def all_records(self):
        raise AssertionError("a run that changes one wheel renders every project")

    monkeypatch.setattr(Store, "rows", rows)
    monkeypatch.setattr(Store, "all_records", all_records)
    again = I.build_index(wheels, out)
    assert loaded == [] and again.written == [] and again.reused == 300  # nothing changed: no row read
    make_wheel(wheels, "p007", "2.0", device={"p007/_k.so": ["gfx942"]})
    before = snapshot(out)
    added = I.build_index(wheels, out)
    assert added.read == 1 and sum(loaded) <= 10, loaded  # the rows of one bucket of file names
    assert sorted(added.pages_written) == ["gfx942/simple/p007/index.html", "gfx942/simple/p007/index.json"]
    changed = {rel for rel, st in snapshot(out).items() if before.get(rel) != st}
    assert all("p007" in rel for rel in changed), changed


REMOVE_WATCH = """\
import os, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from pathlib import Path
from helpers import inconsistencies
from rocm_build_backend.wheel.index.publish import publish
out = Path(sys.argv[3])
seen = []
real_replace, real_unlink = os.replace, os.unlink
def replacing(src, dst, **kw):
    seen.extend(inconsistencies(out)); real_replace(src, dst, **kw); seen.extend(inconsistencies(out))
def unlinking(path, **kw):
    seen.extend(inconsistencies(out)); real_unlink(path, **kw); seen.extend(inconsistencies(out))
os.replace, os.unlink = replacing, unlinking
publish(out, remove=[sys.argv[4]], add=sys.argv[5:])
print(len(seen), seen[:3])
"""


def test_remove_and_replace_keep_every_moment_consistent(tmp_path):
    dist = tmp_path / "dist"
    a1 = make_wheel(dist, "alpha", "1.0", device={"alpha/_k.so": ["gfx90a"]})
    a2 = make_wheel(dist, "alpha", "2.0", device={"alpha/_k.so": ["gfx90a"]})
    out = tmp_path / "out"
    publish(out, add=[a1, a2])
    a2b = make_wheel(
        tmp_path / "rebuilt", "alpha", "2.0", device={"alpha/_k.so": ["gfx90a"], "alpha/_j.so": ["gfx90a"]}
    )
    script = tmp_path / "watch.py"
    script.write_text(REMOVE_WATCH)
    proc = subprocess.run(
        [sys.executable, str(script), str(ROOT), str(ROOT / "tests"), str(out), "alpha==1.0", str(a2b)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("0 "), proc.stdout  # a client reading at every step saw no broken link
    assert listed(out, "gfx90a", "alpha") == [a2b.name]
    assert len(list((out / "files").glob("*/*.whl"))) == 1


def test_a_damaged_state_of_a_published_index_is_rebuilt_from_its_hosted_copies(tmp_path):
    dist = tmp_path / "dist"
    a1 = make_wheel(dist, "alpha", "1.0", device={"alpha/_k.so": ["gfx90a"]})
    b1 = make_wheel(dist, "beta", "1.0", device={"beta/_k.so": ["gfx942"]})
    out = tmp_path / "out"
    publish(out, add=[dist])  # a folder: each wheel in it
    (out / I.DB_NAME).write_bytes(b"not a database " * 100)
    c1 = make_wheel(tmp_path / "later", "gamma", "1.0", device={"gamma/_k.so": ["gfx90a"]})
    result = publish(out, add=[c1])
    assert any("damaged" in w for w in result.warnings), result.warnings
    assert listed(out, "gfx90a", "alpha") == [a1.name] and listed(out, "gfx942", "beta") == [b1.name]
    assert listed(out, "gfx90a", "gamma") == [c1.name]
    assert inconsistencies(out) == [] and len(list((out / "files").glob("*/*.whl"))) == 3
    assert publish(out, remove=["beta==1.0"]).wheels_removed == [b1.name]  # the rebuilt state is whole
