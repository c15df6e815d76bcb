"""The README's settings table is the settings model's own, and CHANGELOG has an Unreleased section."""


from rocm_build_backend.builder.settings import settings_table
from helpers import ROOT


def test_readme_settings_table_matches_the_model():
    readme = (ROOT / "README.md").read_text()
    for key, env, default, doc in settings_table():
        row = f"| `{key}` | `{env}` | `{default}` | {doc} |"
        assert row in readme, row


def test_readme_opens_with_the_two_setup_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    block = lines[lines.index("```sh") + 1: lines.index("```sh") + 3]
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
