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


class TemplateError(PortableError, ValueError):
    """A template could not be rendered: a syntax error, an undefined name, a missing include;
    the message starts with the template's file and line."""


class DialectNameError(PortableError):
    """A template uses a dialect name (namespace.name) the mapping table lacks; the message
    gives the nearest names. Not an AttributeError: Jinja2 would turn that into an undefined
    value and lose the message."""

    def __init__(self, name: str, nearest=(), space: str = "", where: str = ""):
        self.name, self.nearest, self.space, self.where = name, list(nearest), space, where
        hint = f"nearest: {', '.join(self.nearest)}" if self.nearest else "no name is near it"
        see = f"portable dialect {space}" if space else "portable dialect"
        super().__init__(f"{where + ': ' if where else ''}{name}: no such dialect name; {hint} (see {see})")

    def at(self, where: str) -> "DialectNameError":
        """The same error placed at `where` (a template's file:line), for the renderer to raise."""
        return DialectNameError(self.name, self.nearest, self.space, where)
