"""One error type with a message and a hint; a few subclasses name the common cases.

Library code raises these; only the CLI and the hook wrapper turn them into
``error: ...`` / ``hint: ...`` lines. Nothing here imports anything heavy.

Every class carries the exit code its case gets, the same for every command:

    0  success, or "yes"                     (nothing raised)
    1  a definite no: does not load, build refused       DEFINITE_NO
    2  a usage or input error                            USAGE
    3  cannot tell: no GPU found, a file we cannot read  CANNOT_TELL
"""

from __future__ import annotations

OK = 0
DEFINITE_NO = 1
USAGE = 2
CANNOT_TELL = 3


class RocmBuildBackendError(Exception):
    """A problem the user can fix: ``message`` says what happened, ``hint`` what to do."""

    exit_code = USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def lines(self) -> list[str]:
        out = [f"error: {self.message}"]
        if self.hint:
            out.append(f"hint: {self.hint}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


class ConfigError(RocmBuildBackendError):
    """Invalid or unknown settings; ``problems`` holds every one found, not just the first."""

    def __init__(self, problems: list[str], *, hint: str | None = None) -> None:
        self.problems = list(problems)
        if len(self.problems) == 1:
            message = self.problems[0]
        else:
            message = f"{len(self.problems)} problems in the settings: " + "; ".join(self.problems)
        super().__init__(message, hint=hint)


class UnknownTargetError(RocmBuildBackendError):
    """A GPU target name that is not in the target table."""


class NoGpuDetectedError(RocmBuildBackendError):
    """``targets = "auto"`` and no probe found a GPU."""

    exit_code = CANNOT_TELL


class BackendUnavailableError(RocmBuildBackendError):
    """The wrapped build backend cannot be imported."""


class ToolchainError(RocmBuildBackendError):
    """The HIP compiler is missing or cannot emit code for a requested target."""

    exit_code = DEFINITE_NO


class EnforcementError(RocmBuildBackendError):
    """Enforcement is on and its pinned compilers cannot be put in place (no safe folder, no toolkit)."""

    exit_code = DEFINITE_NO


class StaleBuildTreeError(RocmBuildBackendError):
    """A build tree or wheel was made for other GPU targets."""

    exit_code = DEFINITE_NO


class TargetMismatchError(RocmBuildBackendError):
    """The built wheel's device code does not match the requested targets."""

    exit_code = DEFINITE_NO


class FormatError(RocmBuildBackendError):
    """Bytes that do not parse as the container they claim to be (truncated, damaged)."""

    exit_code = CANNOT_TELL


class WheelError(RocmBuildBackendError):
    """A wheel that cannot be read or rewritten."""

    exit_code = CANNOT_TELL
