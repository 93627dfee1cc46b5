"""glibc's allocator in TensorBoard's process, set for answers of hundreds of KB to a few MB.

Every answer the shim passes on arrives through gRPC as one buffer (a module expansion ~300 KB, a node
list ~2 MB on a 50k-node file): grpc-core assembles it, Python copies it into a ``bytes``, and the shim
slices the JSON out of it. With glibc's defaults those buffers are mapped and unmapped, or trimmed off the
top of a thread's heap, on every answer, so each one is faulted in and zeroed anew: receiving the answer
cost more CPU in TensorBoard's process than the sidecar spent making it (perf: page faults, page
clearing and unmapping were most of the receiving thread's time).

Fixed thresholds keep such buffers on the heap and the freed memory with it:

- ``M_MMAP_THRESHOLD`` 8 MB: blocks below it come from the heap (glibc starts at 128 KB and raises it
  only as mapped blocks are freed);
- ``M_TRIM_THRESHOLD`` 16 MB: free memory at the top of a heap is given back to the system only beyond
  this (twice the mmap threshold, glibc's own ratio).

On the 48-layer compare file this about halves a module expansion's time through gRPC and cuts a node
list's by more than half (``tests/shim/bench_shim.py`` measures each hop; run it with
``GRAPH_ASCEND_TB_MALLOC=default`` to compare). The cost is memory: up to the trim threshold of free
memory may stay with each of the process's heaps.

It changes TensorBoard's whole process, so it is done once, logged, and can be turned off:
``GRAPH_ASCEND_TB_MALLOC=default`` leaves glibc's settings alone. Other C libraries (musl, macOS,
Windows) have no ``mallopt``: nothing is done there.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import threading
from typing import Optional

logger = logging.getLogger(__name__)

ENV = "GRAPH_ASCEND_TB_MALLOC"
# glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 8 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES

_lock = threading.Lock()
_outcome: Optional[str] = None


def tune_for_large_answers() -> str:
    """Sets the thresholds above once per process; returns what was done: ``"tuned"``, ``"off"`` (the
    environment said so), ``"unsupported"`` (not glibc) or ``"failed"`` (glibc refused a value)."""
    global _outcome
    with _lock:
        if _outcome is None:
            _outcome = _tune()
            if _outcome == "tuned":
                logger.info(
                    "graph_ascend: glibc malloc thresholds set for large answers (mmap %d MB, trim %d MB; %s=default "
                    "keeps glibc's)",
                    MMAP_THRESHOLD_BYTES >> 20,
                    TRIM_THRESHOLD_BYTES >> 20,
                    ENV,
                )
        return _outcome


def _tune() -> str:
    if os.environ.get(ENV, "").strip().lower() in ("default", "off", "0"):
        return "off"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "unsupported"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "unsupported"
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on error.
    ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    ok = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1 and ok
    return "tuned" if ok else "failed"
