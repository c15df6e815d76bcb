"""``variant = true``: the setting has one spelling in every channel (the builds that hand back a
variant wheel: tests/integration/test_variant_build.py).
"""

from __future__ import annotations

from rocm_build_backend.builder.settings import load_settings
from rocm_build_backend.builder.variant import under_pip


def test_the_setting_has_one_spelling():
    assert load_settings({"tool": {"rocm-build-backend": {"variant": True}}}).variant is True
    assert load_settings(None, {"rocm-build-backend.variant": "true"}).variant is True
    assert load_settings(None, None, {"ROCM_BUILD_BACKEND_VARIANT": "1"}).variant is True
    assert load_settings().variant is False
    assert under_pip({"PIP_BUILD_TRACKER": "/tmp/t"}) and not under_pip({})
