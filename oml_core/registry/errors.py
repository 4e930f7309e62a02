"""Errors and warnings of the plugin registry; each message names the plugin, kind, name or argument."""


class RegistryError(Exception):
    """Base class of every registry error."""


class UnknownNameError(RegistryError, LookupError):
    """A name (or ``plugin:name``) that no loaded plugin provides for the kind asked for."""


class AmbiguousNameError(RegistryError, LookupError):
    """A name given by two or more plugins; the message lists the qualified ``plugin:name`` forms."""


class ConfigError(RegistryError, ValueError):
    """A ``{name, args}`` spec that is malformed (missing name, unknown keys, a conflicting argument)."""


class UnexpectedArgumentError(ConfigError, TypeError):
    """An argument the component's constructor does not accept (no silent dropping)."""


class MissingArgumentError(ConfigError, TypeError):
    """A required constructor argument given neither in the config nor at runtime."""


class InterfaceError(RegistryError, TypeError):
    """A registered factory whose product does not implement the interface of its kind."""


class PluginLoadError(RegistryError, ImportError):
    """A plugin (or one of its lazy factories) that cannot be imported or whose hook failed."""


class DuplicateRegistrationError(RegistryError, ValueError):
    """One plugin registering the same name twice for one kind."""


class PluginWarning(UserWarning):
    """Emitted when a broken plugin is skipped (``OML_STRICT_PLUGINS=1`` raises instead)."""


#: Exceptions that pass through the guards around a plugin's import and hooks: they are not a plugin's fault
#: (a user's Ctrl-C; a generator being closed). Every other ``BaseException``, ``SystemExit`` included, is.
PROPAGATED_EXCEPTIONS: tuple[type[BaseException], ...] = (KeyboardInterrupt, GeneratorExit)


def is_plugin_failure(error: BaseException) -> bool:
    """True when ``error``, raised by a plugin's code, is the plugin's failure to report (and the host goes on);
    False for :data:`PROPAGATED_EXCEPTIONS`, which the caller must re-raise."""
    return not isinstance(error, PROPAGATED_EXCEPTIONS)


def describe_error(error: BaseException) -> str:
    """``Type: message`` of an ``Exception``; the ``repr`` (``SystemExit(3)``) of any other ``BaseException``,
    whose ``str`` alone (``3``) would not say what happened."""
    if isinstance(error, Exception):
        return f"{type(error).__name__}: {error}"
    return repr(error)
