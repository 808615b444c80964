"""What a path that needs an extra says when the extra is not installed.

``pip install delayqueue`` is the client alone; the server, the report and the testing
helpers come with extras (pyproject.toml), and their modules are imported only when used.
One line names the extra to install, the same from the command line (cli/failure.py) and
from the testing helpers (testing.py).
"""

from __future__ import annotations

# Our own top-level packages: a module of theirs missing is a broken install, not an extra.
OWN_PACKAGES = ("delayqueue", "spark_jobs")


def missing_extra(what: str, extra: str, error: ModuleNotFoundError) -> str:
    """``what`` needs ``extra``, in one line naming the missing module.

    Raises:
        ModuleNotFoundError: ``error`` itself, when the missing module is one of our own.
    """
    if (error.name or "").split(".")[0] in OWN_PACKAGES:
        raise error
    return f"{what} needs `pip install 'delayqueue[{extra}]'` (no module named {error.name!r})"
