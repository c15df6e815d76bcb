"""The docs stay true: the README is a front page whose links resolve, every path the docs cite
exists, the architecture's numbers are the import graph's, and CHANGELOG has an Unreleased
section. The generated settings reference is checked in ``test_settings_schema.py``."""

import json
import re
import subprocess
import sys

from helpers import ROOT

DOCS = sorted((ROOT / "docs").rglob("*.md"))
# a path in backticks that starts with one of the repository's top folders
CITED = re.compile(r"`((?:tests|bench|docs|tools|examples|sample_projects|rocm_build_backend|\.ci)/[^`\s]*)`")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def _exists(cited: str) -> bool:
    path = cited.rstrip(".,;:").split("#")[0]
    if any(c in path for c in "*<{$"):  # a pattern or a placeholder: its fixed folder must exist
        path = re.split(r"[*<{$]", path)[0].rsplit("/", 1)[0]
    return (ROOT / path).exists()


def test_the_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 300, len(lines)
    assert not [line for line in lines if line.startswith("|")], "tables belong in docs/ (docs/performance.md)"
    for label, target in LINK.findall(text):
        assert not target.startswith(("http:", "https:")), target
        assert (ROOT / target).exists(), target
        assert label == f"`{target}`", (label, target)  # the path reads right where links do not resolve


def test_every_link_and_cited_path_in_the_docs_exists():
    missing = []
    for doc in [ROOT / "README.md", *DOCS]:
        text = doc.read_text()
        missing += [(doc.name, c) for c in CITED.findall(text) if not _exists(c)]
        for _, target in LINK.findall(text):
            if not target.startswith(("http:", "https:", "#", "mailto:")):
                if not (doc.parent / target.split("#")[0]).exists():
                    missing.append((doc.name, target))
    assert missing == []


def test_the_docs_index_links_every_page():
    index = (ROOT / "docs" / "index.md").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in DOCS if p.parent.name != "json"} - {"index.md"}
    linked = {target for _, target in LINK.findall(index)}
    assert pages <= linked, sorted(pages - linked)


def test_the_architecture_numbers_are_the_import_graphs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "import_graph.py"), "--json"], capture_output=True, text=True, check=True
    ).stdout
    graph = json.loads(out)
    text = (ROOT / "docs" / "architecture.md").read_text()
    said = (
        f"({graph['modules']} modules, {graph['edges']} import edges, {len(graph['cycles'])} cycles)",
        f"{graph['edges_inside_functions']} of the {graph['edges']} edges",
    )
    assert [s for s in said if s not in " ".join(text.split())] == [], said
    assert "`build/`" not in text and "  build/ " not in text  # the package is builder/


def test_readme_opens_with_the_two_setup_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    block = lines[lines.index("```sh") + 1 : lines.index("```sh") + 3]
    assert block[0].startswith("bash tools/setup.sh && bash tools/demo.sh")
    assert block[1].startswith("bash tools/setup.sh && python3 -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash tools/setup.sh" in ci and "python3 -m pytest" in ci


def test_changelog_has_unreleased():
    assert "## Unreleased" in (ROOT / "CHANGELOG.md").read_text()


def test_plan_json_doc_names_every_key_of_its_schema():
    import json

    schema = json.loads((ROOT / "rocm_build_backend" / "data" / "schemas" / "plan.schema.json").read_text())
    doc = (ROOT / "docs" / "json" / "plan.md").read_text()
    for key in schema["properties"]:
        assert f"`{key}`" in doc, key
    assert set(schema["required"]) == set(schema["properties"])


def test_setup_waits_for_the_package_locks():
    """Every apt-get run of tools/setup.sh waits for the dpkg and list locks (apt's own timeout)."""
    import re

    text = (ROOT / "tools" / "setup.sh").read_text()
    runs = [line for line in text.splitlines() if re.search(r'(apt-get|\$\{apt\[@\]\}"?) (update|install)', line)]
    assert len(runs) == 2 and all(line.lstrip().startswith('"${apt[@]}"') for line in runs), runs
    assert "apt=(apt-get -o DPkg::Lock::Timeout=600)" in text
