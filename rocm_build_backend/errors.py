"""One error type with a message and a hint; a few subclasses name the common cases.

Library code raises these; only the CLI and the hook wrapper turn them into
``error: ...`` / ``hint: ...`` lines. Nothing here imports anything heavy.
"""

from __future__ import annotations


class RocmBuildBackendError(Exception):
    """A problem the user can fix: ``message`` says what happened, ``hint`` what to do."""

    exit_code = 1

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

    exit_code = 2


class BackendUnavailableError(RocmBuildBackendError):
    """The wrapped build backend cannot be imported."""


class ToolchainError(RocmBuildBackendError):
    """The HIP compiler is missing or cannot emit code for a requested target."""


class StaleBuildTreeError(RocmBuildBackendError):
    """A build tree or wheel was made for other GPU targets."""


class TargetMismatchError(RocmBuildBackendError):
    """The built wheel's device code does not match the requested targets."""


class FormatError(RocmBuildBackendError):
    """Bytes that do not parse as the container they claim to be (truncated, damaged)."""


class WheelError(RocmBuildBackendError):
    """A wheel that cannot be read or rewritten."""
