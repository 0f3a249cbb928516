"""glibc malloc settings for crdscale's own processes (the CLI, the benchmarks).

Decoding and viewing a 2,000-CRD heap profile makes numpy temporaries of 1-8 MB
(an index per stack byte, a value per frame). glibc serves blocks that large
with mmap and unmaps them when they are freed, so the next profile's arrays are
faulted in page by page again: that was half the time of decoding the stacks
(17 -> 9 ms per profile; ``benchmarks/parse.py``). Serving blocks up to 16 MB
from the heap and keeping up to 64 MB of it free for reuse avoids that, at the
price of a process that holds that much more memory between profiles.

Only processes crdscale owns call :func:`keep_freed_memory`; importing the
library changes nothing (a notebook kernel keeps its own allocator settings).
"""

from __future__ import annotations

import ctypes
import platform

MMAP_THRESHOLD_BYTES = 16 << 20
TRIM_THRESHOLD_BYTES = 64 << 20
# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Keep freed blocks of up to :data:`MMAP_THRESHOLD_BYTES` for reuse (glibc only); returns
    whether the settings took."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
