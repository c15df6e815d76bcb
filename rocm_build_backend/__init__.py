"""rocm-build-backend: a PEP 517 build backend that wraps a project's real backend and
builds it for the right GPU targets, then proves it from the binaries.

    [build-system]
    requires = ["rocm-build-backend", "setuptools>=64"]
    build-backend = "rocm_build_backend"

    [tool.rocm-build-backend]
    backend = "setuptools.build_meta"

Each hook below is one call into ``rocm_build_backend.builder.flow``, where the flow of a
build lives, or, for the hooks that only pass through to the wrapped backend (``build_sdist``,
``get_requires_for_build_*``, whether an optional hook exists, and ``prepare_metadata_*`` of a
project that declares no GPU code), into ``rocm_build_backend.builder.delegate``; nothing here
decides anything. The optional hooks
(``build_editable``, ``prepare_metadata_for_build_*``, ``get_requires_for_build_*``) exist on
this module exactly when the wrapped backend has them.

This is the package's one lazy import mechanism: importing this module imports nothing else,
and each hook imports the module that runs it when it is called (a frontend imports the
backend and calls one or two hooks in a process). Everywhere else imports are at the top of
their module (``tests/test_import_graph.py`` checks both).
"""

from __future__ import annotations

from rocm_build_backend._version import __version__

TYPE_CHECKING = False  # typing itself is not imported at run time: it would cost the import
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

    ConfigSettings = Mapping[str, Any] | None

__all__ = ["__version__", "build_wheel", "build_sdist"]


def build_wheel(
    wheel_directory: str, config_settings: ConfigSettings = None, metadata_directory: str | None = None
) -> str:
    from rocm_build_backend.builder.flow import build

    return build("build_wheel", wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    """An sdist carries no GPU-specific content: the wrapped backend builds it as it is."""
    from rocm_build_backend.builder.delegate import build_sdist as delegate_build_sdist

    return delegate_build_sdist(sdist_directory, config_settings)


# The optional hooks: offered by __getattr__ below, under their PEP 517/660 names.


def _build_editable(
    wheel_directory: str, config_settings: ConfigSettings = None, metadata_directory: str | None = None
) -> str:
    from rocm_build_backend.builder.flow import build

    return build("build_editable", wheel_directory, config_settings, metadata_directory)


def _get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> list[str]:
    from rocm_build_backend.builder.delegate import get_requires

    return get_requires("get_requires_for_build_wheel", config_settings)


def _get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> list[str]:
    from rocm_build_backend.builder.delegate import get_requires

    return get_requires("get_requires_for_build_sdist", config_settings)


def _get_requires_for_build_editable(config_settings: ConfigSettings = None) -> list[str]:
    from rocm_build_backend.builder.delegate import get_requires

    return get_requires("get_requires_for_build_editable", config_settings)


def _metadata(hook: str, metadata_directory: str, config_settings: ConfigSettings) -> str:
    """A project that declares no GPU code and no target label gets the wrapped backend's metadata
    as it is (``delegate``: nothing of the build's steps is imported); any other, the plan's."""
    from rocm_build_backend.builder.delegate import plain_metadata

    name = plain_metadata(hook, metadata_directory, config_settings)
    if name is not None:
        return name
    from rocm_build_backend.builder.flow import prepare_metadata

    return prepare_metadata(hook, metadata_directory, config_settings)


def _prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: ConfigSettings = None) -> str:
    return _metadata("prepare_metadata_for_build_wheel", metadata_directory, config_settings)


def _prepare_metadata_for_build_editable(metadata_directory: str, config_settings: ConfigSettings = None) -> str:
    return _metadata("prepare_metadata_for_build_editable", metadata_directory, config_settings)


_OPTIONAL: dict[str, Callable[..., Any]] = {
    f.__name__[1:]: f
    for f in (
        _build_editable,
        _get_requires_for_build_wheel,
        _get_requires_for_build_sdist,
        _get_requires_for_build_editable,
        _prepare_metadata_for_build_wheel,
        _prepare_metadata_for_build_editable,
    )
}
for _name, _hook in _OPTIONAL.items():
    _hook.__name__ = _hook.__qualname__ = _name
del _name, _hook

if TYPE_CHECKING:  # the optional hooks as a type checker sees them; at run time __getattr__ offers them
    build_editable = _build_editable
    get_requires_for_build_wheel = _get_requires_for_build_wheel
    get_requires_for_build_sdist = _get_requires_for_build_sdist
    get_requires_for_build_editable = _get_requires_for_build_editable
    prepare_metadata_for_build_wheel = _prepare_metadata_for_build_wheel
    prepare_metadata_for_build_editable = _prepare_metadata_for_build_editable


def __getattr__(name: str) -> Callable[..., Any]:
    """Optional hooks exist exactly when the wrapped backend has them (frontends use hasattr)."""
    if name not in _OPTIONAL:
        raise AttributeError(name)
    from rocm_build_backend.builder.delegate import has_hook

    if not has_hook(name):
        raise AttributeError(f"the wrapped build backend has no {name}")
    return _OPTIONAL[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_OPTIONAL))
