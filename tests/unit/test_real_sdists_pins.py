"""The profiles against the pins of the real sdists (tests/real_sdists.json), without the
network: every profile that cites no sdist is a known one. The pins, the downloader and the real
sdists themselves are tested in ``tests/integration/test_real_sdists.py``.
"""

from __future__ import annotations


from rocm_build_backend.builder.profiles import all_profiles
from helpers import load_pins

PINS = load_pins()


def _cited_sdist(profile) -> dict | None:
    return next((p for p in PINS if profile.source.startswith(f"{p['name']} {p['version']} sdist")), None)


def test_profiles_citing_no_sdist_are_the_known_ones():
    """bitsandbytes and torchvision have no sdist on PyPI with the code the profile describes
    (bitsandbytes' last sdist, 0.42.0, predates its CMake build; torchvision's last is 0.1.6);
    torch and apex have none at all."""
    assert sorted(p.name for p in all_profiles() if _cited_sdist(p) is None) == [
        "apex",
        "bitsandbytes",
        "torch",
        "torchvision",
    ]
