"""Optional packages (soundfile, av, pillow, pypdfium2, tqdm), imported lazily: a missing one raises
:class:`~vllm_tasks.errors.MissingDependency` naming the extra that installs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependency


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional module, or raise a ``MissingDependency`` that says how to install it.

    Args:
        module: the import name, e.g. ``"PIL.Image"``.
        extra: the ``vllm-tasks`` extra that installs it, e.g. ``"image"``.
        purpose: what needs it, for the message, e.g. ``"checking images before upload"``.

    Raises:
        MissingDependency: the module (or a library it loads) is not installed.

    Examples:
        >>> Image = require("PIL.Image", "image", "checking images before upload")
    """
    try:
        return importlib.import_module(module)
    except (ImportError, OSError) as error:  # OSError: soundfile is there but libsndfile is not
        raise MissingDependency(module.split(".", maxsplit=1)[0], extra, purpose) from error
