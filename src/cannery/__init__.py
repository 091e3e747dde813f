"""cannery: one declarative catalog → locked, rendered, verified accelerator images."""

import sys as _sys
from types import ModuleType as _ModuleType

__version__ = "0.1.0"

# httpx's own __init__ imports its command-line client (httpx._main: click, pygments, and rich's
# progress, syntax and table modules) only to offer `httpx.main`, which cannery never calls:
# about 50 ms of every networked command's start-up. An empty module already standing under
# that name makes the import fail the way httpx expects when its CLI extras are not installed
# (httpx then defines a stub `main`); nothing else in httpx changes. `setdefault`: a process that
# imported httpx before cannery keeps its own.
_sys.modules.setdefault("httpx._main", _ModuleType("httpx._main"))
