"""How results are written for people: one function per result, from the plain data the library
returns (``Detection``, ``AuditReport``, ``CheckReport``, ``EnvReport``, ``CacheReport``,
``IndexResult``, ``InstallResult``, ``ThinResult``, ``SplitResult``) to the text a verb prints.

The library decides and measures; this module only lays out what it was given. It computes
nothing a ``--json`` document would lack, reads no file and runs nothing. Every string that
came from a file or a wheel passes through ``printable`` where the verb's text did before.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Sequence

from rocm_build_backend.binary.printable import printable, printable_lines

if TYPE_CHECKING:  # pragma: no cover
    from rocm_build_backend.binary.report import AuditReport
    from rocm_build_backend.gpu.device import Detection, Device
    from rocm_build_backend.wheel.cache.report import CacheReport
    from rocm_build_backend.wheel.check.environment import EnvReport
    from rocm_build_backend.wheel.check.wheels import CheckReport
    from rocm_build_backend.wheel.index.run import IndexResult
    from rocm_build_backend.wheel.install.result import InstallResult
    from rocm_build_backend.wheel.thin.run import ThinResult
    from rocm_build_backend.wheel.thin.split import SplitResult

_LOADS = {"ok": "yes", "fails": "no", "unknown": "cannot tell"}


def _s(n: int) -> str:
    """The plural ending for ``n`` things."""
    return "" if n == 1 else "s"


# ------------------------------------------------------------------------- detect


def detection(found: Detection) -> str:
    """``detect``: the GPUs seen, the build targets, what each probe saw, the warnings."""
    lines = _device_table(found.devices, found.source) if found.devices else [f"no {found.looked_for} GPU found"]
    shown = ", ".join(str(t) for t in found.targets) or "(none)"
    lines.append(f"build targets: {shown}" + (f"  (decided by {found.source})" if found.source else ""))
    if found.seen:
        lines.append("probes:")
        lines.extend(f"  {found.label(p)}: {s}" for p, s in found.seen.items())
    if found.warnings:
        lines.append("warnings:")
        lines.extend(f"  {w}" for w in found.warnings)
    return "\n".join(lines)


def _device_table(devices: Sequence[Device], source: str | None) -> list[str]:
    lines = [f"GPUs seen by {source}:"]
    head = ("node", "target", "physical", "kind", "build", "name", "reason")
    rows = [
        (
            "-" if d.node is None else str(d.node),
            str(d.target),
            str(d.physical) if d.physical else "-",
            d.kind,
            "yes" if d.included else "no",
            d.name or "-",
            d.reason,
        )
        for d in devices
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    for row in [head, *rows]:
        cells = [c.ljust(w) for c, w in zip(row, widths)] + [row[-1]]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


# -------------------------------------------------------------------------- audit


def audit(report: AuditReport) -> str:
    """``audit``: one row per file, one indented row per container when there are several.

    Every string that came from a file (paths, targets, notes, problems) is passed through
    ``printable``, so a control character in a binary cannot forge a line.
    """
    rows = [tuple(printable(cell) for cell in row) for row in _audit_rows(report)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [printable(report.source)] if report.source else []
    for r in rows:
        cells = "  ".join(f"{r[i]:<{widths[i]}}" for i in range(4))
        lines.append((cells + "  " + r[4]) if r[4] else cells.rstrip())
    if not report.files:
        lines.append("(no binaries)")
    lines.append("")
    lines.append("targets: " + (printable(", ".join(report.targets)) if report.targets else "none"))
    if report.skipped:
        lines.append(f"{report.skipped} other file(s) hold no device code and are not listed")
    problems = list(report.problems) + [f"{f.path}: {p}" for f in report.files for p in f.problems]
    problems += [f"{f.path}: {c.note}" for f in report.files for c in f.containers if not c.read]
    if problems:
        lines.append("problems:")
        lines.extend(f"  {printable(p)}" for p in problems)
    return "\n".join(lines)


def _audit_rows(report: AuditReport) -> list[tuple[str, str, str, str, str]]:
    rows = [("FILE", "KIND", "TARGETS", "EVERY KERNEL", "NOTE")]
    several = len({f.archive for f in report.files if f.archive}) > 1
    for f in report.files:
        name = f"{f.archive}!{f.path}" if several else f.path
        if not f.containers:
            rows.append((name, f.kind, "no device code" if f.readable else "(unreadable)", "", ""))
            continue
        every = "same" if f.complete == f.targets else (", ".join(f.complete) or "none")
        note = f.containers[0].note if len(f.containers) == 1 else f"{len(f.containers)} containers"
        if not f.readable:
            note = "damaged (see problems)" + (f"; {note}" if note else "")
        rows.append((name, f.kind, ", ".join(f.targets) or "(none read)", every, note))
        if len(f.containers) > 1:
            # containers that hold the same thing share a row (libtorch_cuda: 444 fatbins)
            groups: dict[tuple[str, str, tuple[str, ...], str, bool, bool], list[int]] = {}
            for c in f.containers:
                key = (c.where, c.kind, tuple(c.targets), c.note, c.kernels, c.read)
                groups.setdefault(key, []).append(c.offset)
            for (where, kind, targets, cnote, _k, _r), offsets in groups.items():
                label = f"  {where} +0x{offsets[0]:x}" if len(offsets) == 1 else f"  {where} x{len(offsets)}"
                rows.append((label, kind, ", ".join(targets) or "-", "", cnote))
    return rows


# ------------------------------------------------------------------ check, check --env


def check(report: CheckReport) -> str:
    """``check``: the devices, one line per wheel with its verdict, reasons, and a summary."""
    lines = ["devices: " + (", ".join(report.devices) if report.devices else "none found")]
    lines += [f"note: {n}" for n in report.notes]
    for w in report.wheels:
        facts = w.facts
        if facts is not None and facts.known:
            what = ", ".join(facts.targets) if facts.has_device_code else "no device code"
            lines.append(f"{w.status:<8}{w.path.name}  ({facts.source}: {what})")
        else:
            lines.append(f"{w.status:<8}{w.path.name}")
        known = facts is not None and facts.known
        if known:
            for v in w.verdicts:
                if v.reason:
                    lines.append(f"        {v.device}: {'' if v.status != 'ok' else 'note: '}{v.reason}")
        problems = list(facts.problems) if facts is not None else list(w.problems)
        if w.status == "unknown" and not w.verdicts and known:
            problems.append("there is no device to check against")
        label = "warning" if known else "cannot tell"
        lines += [f"        {label}: {p}" for p in problems]
        if facts is not None and facts.mismatch:
            lines.append("        warning: the stamp disagrees with the binaries (the binaries are used):")
            lines += [f"          - {m}" for m in facts.mismatch]
    good = sum(w.status == "ok" for w in report.wheels)
    lines.append(
        f"{good} of {len(report.wheels)} wheel{_s(len(report.wheels))} "
        f"load{'s' if len(report.wheels) == 1 else ''} on every device"
    )
    return printable_lines(lines)


def environment(report: EnvReport) -> str:
    """``check --env``: one row per distribution with device code, reasons, and what was scanned."""
    head = ("DISTRIBUTION", "FILES WITH DEVICE CODE", "TARGETS", "LOADS HERE")
    rows = [
        (f"{d.dist.name} {d.dist.version}", str(len(d.files)), ", ".join(d.targets) or "(none read)", _LOADS[d.status])
        for d in report.dists
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    lines = [f"python: {report.python}", "devices: " + (", ".join(report.devices) or "none found")]
    lines += [f"note: {n}" for n in report.notes]
    for r in [head, *rows]:
        lines.append("  ".join(f"{c:<{widths[i]}}" for i, c in enumerate(r[:3])) + "  " + r[3])
    for d in report.dists:
        if d.status != "ok" and d.reason:
            lines.append(f"{d.dist.name}: {d.reason}")
        elif d.status == "ok" and d.notes:
            lines.append(f"{d.dist.name} loads: " + "; ".join(d.notes))
    s = report.scanned
    lines.append(
        f"{s.get('distributions', 0)} distributions, {s.get('files', 0)} files; {len(report.dists)} with device code"
    )
    return printable_lines(lines)


# -------------------------------------------------------------------- cache, index


def cache(report: CacheReport) -> str:
    """``cache list`` / ``cache purge``: the caches read, each misfit, and what was (or would be) removed."""
    lines = [f"targets: {', '.join(report.targets) or 'none'}"]
    sources = report.sources + [""] * (len(report.caches) - len(report.sources))
    for (tool, path, summary), source in zip(report.caches, sources):
        lines.append(f"{tool} cache: {path} ({summary})" + (f"  [from {source}]" if source else ""))
    shown = [e for e in report.entries if e.status != "ok" or e.targets]
    pure = len(report.entries) - len(shown)
    for e in shown:
        what = ", ".join(e.targets) if e.targets else "no device code"
        line = f"{e.status:<8}{e.tool:<4}{e.label}  ({what})"
        if e.action:
            line += f"  [{e.action}]"
        lines.append(line)
        lines += [f"        {r}" for r in e.reasons]
        if e.action == "would remove":
            lines += [f"        - {p}" for p in e.remove]
        lines += [f"        error: {err}" for err in e.errors]
    if pure:
        lines.append(f"{pure} cached wheel{_s(pure)} without device code (kept)")
    lines += [f"note: {n}" for n in report.notes]
    bad = report.misfits
    if not bad:
        lines.append("no cached wheel misfits these targets")
    elif not report.purge:
        lines.append(
            f"{len(bad)} cached wheel{_s(len(bad))} misfit these targets; "
            "remove them with: "
            + " ".join(["rocm-build-backend cache purge", *map(shlex.quote, report.purge_args), "--yes"])
        )
    elif not report.yes:
        lines.append(f"{len(bad)} would be removed; run again with --yes to remove them")
    else:
        done = sum(e.action == "removed" for e in bad)
        lines.append(f"{done} of {len(bad)} removed")
    return printable_lines(lines)


def index(result: IndexResult) -> str:
    """``index``: each index with its wheel count, what was added, written, skipped and warned
    about, and the indexes left with nothing to serve."""
    lines = []
    for name, n in result.counts.items():
        lines.append(f"{name}: {n} wheel{_s(n)} -> {result.out_dir / name / 'simple'}/")
    if result.wheels_added or result.wheels_removed:
        lines.append(
            f"{len(result.wheels_added)} wheel{_s(len(result.wheels_added))} added or replaced, "
            f"{len(result.wheels_removed)} removed"
        )
    lines.append(
        f"{len(result.pages_written)} page{_s(len(result.pages_written))} written, "
        f"{result.unchanged} unchanged, {len(result.removed)} removed; "
        f"{result.read} wheel{_s(result.read)} read, {result.reused} from the cache"
    )
    for fn, why in result.skipped.items():
        lines.append(f"skipped {fn}: {why}")
    for name in result.nothing_to_serve:
        lines.append(f"{name}: nothing to serve: no wheel in the index loads there")
    lines += [f"warning: {w}" for w in result.warnings]
    if result.metadata_upload:
        lines.append(f"note: upload the .metadata files in {result.metadata_upload} beside the wheels")
    return printable_lines(lines)


# ------------------------------------------------------------------------ install

_WHERE = {
    "cache": "from pip's wheel cache",
    "index": "from the index",
    "built": "built in this run",
    "cache/index": "from uv's cache or the index",
}


def install(result: InstallResult) -> str:
    """``install``: one row per distribution (where it came from, what it holds, whether it
    loads), the rebuilds and refusals, and what was installed."""
    head = ("DISTRIBUTION", "FROM", "TARGETS", "LOADS HERE")
    body = []
    for r in result.rows:
        body.append((f"{r.name} {r.version}", r.origin, ", ".join(r.targets) or "no device code", _LOADS[r.status]))
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(3)]
    lines = ["devices: " + (", ".join(result.devices) or "none found")]
    lines += [f"note: {n}" for n in result.notes]
    for cells in [head, *body]:
        lines.append("  ".join(f"{c:<{widths[i]}}" for i, c in enumerate(cells[:3])) + "  " + cells[3])
    for r in result.rows:
        if r.was:
            where = _WHERE.get(r.was_origin or "", r.was_origin)
            lines.append(f"{r.name}: the wheel {where} held {r.was}; rebuilt from its sdist")
        if r.refused:
            lines.append(f"{r.name}: refused: {r.reason}")
            lines += [f"  {line}" for line in r.build_lines]
        if r.kept:
            lines.append(
                f"{r.name}: {result.tool} kept the installed {r.kept}, which does not load here; installed again"
            )
    if result.dry_run:
        lines.append("dry run: nothing installed")
    elif result.installed:
        lines += _read_back(result)
    else:
        lines.append("nothing installed: " + ("a wheel was refused" if result.exit_code else "no wheels"))
    return printable_lines(lines)


def _read_back(result: InstallResult) -> list[str]:
    """What ``install`` read back from the environment after pip or uv installed the set."""
    n = f"{len(result.rows)} wheel{_s(len(result.rows))}"
    lines = [f"read back from {', '.join(result.where)}:"] if result.where else []
    for r in result.rows:
        if r.installed is not None:
            lines.append(f"  {r.name} {r.installed}" + (": does not load here" if r.name in result.unloaded else ""))
    if result.unloaded:
        return lines + [f"installed {n}, but {', '.join(result.unloaded)} as installed does not load here"]
    return lines + [f"installed {n}; what is installed loads here"]


# --------------------------------------------------------------------- thin, split


def thin(result: ThinResult) -> str:
    """``thin``: the wheel written, what happened to each file with device code, the sizes."""
    lines = [f"{result.output}"]
    for m in result.members:
        data = m.to_json()  # its targets in target order
        kept, dropped = data["kept"], data["dropped"]
        what = {
            "thinned": f"kept {', '.join(kept) or 'nothing'}; dropped {', '.join(dropped)}; "
            f"{_mib(m.size_before)} -> {_mib(m.size_after)}"
            + (f" (in place: {m.layout_reason})" if m.layout == "in place" else ""),
            "dropped": f"removed (held {', '.join(dropped)})",
            "unchanged": f"unchanged ({', '.join(kept)})",
            "kept-whole": f"KEPT WHOLE: {m.reason}",
        }[m.action]
        lines.append(f"  {m.name}: {what}")
    if result.missing:
        lines.append(f"no code for {', '.join(result.missing)}: the new wheel does not load there")
    lines.append(
        f"wheel {_mib(result.wheel_before)} -> {_mib(result.wheel_after)}; installed "
        f"{_mib(result.installed_before)} -> {_mib(result.installed_after)}"
    )
    return printable_lines(lines)


def split(result: SplitResult) -> str:
    """``split``: the source, and per unit the wheel written and its size."""
    lines = [str(result.source)]
    for unit, r in zip(result.units, result.wheels):
        note = f"  ({len(r.kept_whole)} file(s) kept whole)" if r.kept_whole else ""
        lines.append(f"  {unit}: {r.output.name}  {r.wheel_after / (1 << 20):.1f} MiB{note}")
    return printable_lines(lines)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
