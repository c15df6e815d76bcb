"""The compiler cache while a build runs: its hits and misses, and the sccache server.

``watched(choice)`` reads the cache's own statistics before and after the wrapped build
(``sccache --show-stats --stats-format=json``, ``ccache --print-stats``) and puts the difference
in the build log. sccache runs a server that its first compile starts: a server that was already
running (the user's) is used as it is and left running; one that was not, and runs after the
build, was started by the build's compiles and is stopped (``sccache --stop-server``). Whether a
server runs is asked of its socket (``SCCACHE_SERVER_UDS``, else ``SCCACHE_SERVER_PORT`` on
localhost, 4226 by default), which starts nothing; so a build that compiles nothing costs one
connection attempt.

The cache's programs run through ``gpu.programs.run_capped`` (output and time capped); a cache
that does not answer is a line in the log, never a failed build.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, NamedTuple

from rocm_build_backend.builder.cache import CacheChoice
from rocm_build_backend.builder.log import log
from rocm_build_backend.gpu.programs import run_capped

_TIMEOUT = 30.0
_CCACHE_HITS = ("direct_cache_hit", "preprocessed_cache_hit")
_CCACHE_MISSES = ("cache_miss",)
_CCACHE_OTHER = (
    "called_for_link",
    "called_for_preprocessing",
    "unsupported_compiler_option",
    "unsupported_source_language",
    "no_input_file",
    "multiple_source_files",
    "compile_failed",
    "output_to_stdout",
    "could_not_find_compiler",
)


class Counts(NamedTuple):
    hits: int = 0
    misses: int = 0
    other: int = 0  # requests the cache ran without caching (links, unsupported options)

    def __sub__(self, before: Counts) -> Counts:
        return Counts(self.hits - before.hits, self.misses - before.misses, self.other - before.other)


def server_up(env: Mapping[str, str]) -> bool:
    """Whether an sccache server answers on its socket (connecting starts none)."""
    uds = env.get("SCCACHE_SERVER_UDS", "")
    try:
        if uds:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1.0)
                s.connect(uds.replace("\\x00", "\0"))
            return True
        port = int(env.get("SCCACHE_SERVER_PORT", "4226") or "4226")
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False


def _sum(section: Any) -> int:
    counts = section.get("counts") if isinstance(section, dict) else None
    return sum(v for v in counts.values() if isinstance(v, int)) if isinstance(counts, dict) else 0


def parse_sccache(text: str) -> Counts | None:
    """Counts from ``sccache --show-stats --stats-format=json``; None when it is not that."""
    try:
        stats = json.loads(text).get("stats")
    except (ValueError, AttributeError):
        return None
    if not isinstance(stats, dict):
        return None
    other = sum(
        stats.get(k, 0)
        for k in ("requests_not_cacheable", "requests_unsupported_compiler", "requests_not_compile")
        if isinstance(stats.get(k, 0), int)
    )
    return Counts(_sum(stats.get("cache_hits")), _sum(stats.get("cache_misses")), other)


def parse_ccache(text: str) -> Counts | None:
    """Counts from ``ccache --print-stats`` (``name<TAB>value`` lines); None when it is not that."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().isdigit():
            values[name.strip()] = int(value)
    if "cache_miss" not in values:
        return None
    return Counts(
        sum(values.get(k, 0) for k in _CCACHE_HITS),
        sum(values.get(k, 0) for k in _CCACHE_MISSES),
        sum(values.get(k, 0) for k in _CCACHE_OTHER),
    )


def read_counts(choice: CacheChoice, env: Mapping[str, str]) -> Counts | None:
    """The cache's counters now, from its own statistics; None when it does not answer."""
    if choice.program is None:
        return None
    args = ["--show-stats", "--stats-format=json"] if choice.kind == "sccache" else ["--print-stats"]
    try:
        ran = run_capped([choice.program, *args], env=env, timeout=_TIMEOUT)
    except OSError:
        return None
    if ran.returncode != 0:
        return None
    text = ran.stdout.decode("utf-8", "replace")
    return parse_sccache(text) if choice.kind == "sccache" else parse_ccache(text)


def _stop(choice: CacheChoice, env: Mapping[str, str]) -> None:
    try:
        run_capped([str(choice.program), "--stop-server"], env=env, timeout=_TIMEOUT)
    except OSError as exc:
        log(f"warning: compiler cache: could not stop the sccache server this build started: {exc}")


@contextmanager
def watched(choice: CacheChoice, env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Read the cache's counters around the block; log hits and misses; stop an sccache server
    that the block's compiles started."""
    if choice.program is None:
        yield
        return
    env = dict(os.environ if env is None else env)
    was_up = choice.kind == "sccache" and server_up(env)
    before = read_counts(choice, env) if choice.kind == "ccache" or was_up else Counts()
    try:
        yield
    finally:
        after = None
        if choice.kind == "ccache" or was_up or server_up(env):
            after = read_counts(choice, env)
        if choice.kind == "sccache" and not was_up and after is not None:
            _stop(choice, env)
        if choice.kind == "sccache" and after is None and not was_up:
            pass  # no server came up: no compile went through sccache (a metadata hook, a pure project)
        elif after is None or before is None:
            log(f"compiler cache: {choice.kind} gave no statistics")
        else:
            got = after - before
            log(
                f"compiler cache: {choice.kind}: {got.hits} hits, {got.misses} misses, "
                f"{got.other} run uncached (from {choice.kind}'s own statistics"
                + ("; its server, started by this build, stopped)" if choice.kind == "sccache" and not was_up else ")")
            )
