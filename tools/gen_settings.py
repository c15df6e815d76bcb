"""Rewrite the settings' JSON Schema and reference page from the settings model.

Usage: python tools/gen_settings.py

Writes rocm_build_backend/data/schemas/settings.schema.json and docs/reference/settings.md
(tests/unit/test_settings_schema.py fails when they differ from what this writes).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rocm_build_backend.builder.settings_schema import REFERENCE, SCHEMA_NAME, reference_markdown, schema_text  # noqa: E402
from rocm_build_backend.data import path  # noqa: E402

for target, text in ((path(SCHEMA_NAME), schema_text()), (ROOT / REFERENCE, reference_markdown())):
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target.relative_to(ROOT)}")
