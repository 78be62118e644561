"""Errors a user sees: each names the argument or input and what was expected."""


class PortableError(Exception):
    """Base class for the project's own errors."""


class InputError(PortableError, ValueError):
    """A kernel argument or template parameter is not what the kernel accepts."""


class TargetError(PortableError, ValueError):
    """An unknown target, or a tensor on a device no target matches."""


class ToolchainMissing(PortableError, RuntimeError):
    """A compiler or runtime this action needs is not installed."""


class CompileError(PortableError, RuntimeError):
    """The compiler rejected a rendered source; the message holds its log and the source lines."""

    def __init__(self, message: str, log: str = "", source: str = ""):
        super().__init__(message)
        self.log = log
        self.source = source


class LaunchError(PortableError, RuntimeError):
    """The driver refused a load or launch."""
