"""graph-ascend's TensorBoard plugin (GRAPH_ASCEND tab): a thin shim over the ``graph-ascend serve`` sidecar.

Modules: ``loader`` (TensorBoard entry point, coexistence with msprobe's plugin), ``plugin`` (routing,
gRPC calls, answers passed through), ``schema`` (route table and messages from the API descriptor),
``jsonmap`` (the browser's requests -> protobuf; answers come rendered by the sidecar), ``sidecar``
(process management, finding the binary), ``static_files`` (the built frontend), ``allocator`` (glibc's
malloc thresholds in TensorBoard's process, for answers of megabytes).

The version is the installed distribution's (``graph-ascend``), which the wheel takes from the workspace's
Cargo.toml, like the binary's ``graph-ascend --version``: there is no second copy to keep in step.
"""

from importlib import metadata as _metadata

DISTRIBUTION = "graph-ascend"

try:
    __version__ = _metadata.version(DISTRIBUTION)
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
