"""graph-ascend's TensorBoard plugin (GRAPH_ASCEND tab): a thin shim over the ``graph-ascend serve`` sidecar.

Modules: ``loader`` (TensorBoard entry point, coexistence with msprobe's plugin), ``plugin`` (routing,
gRPC calls, answers passed through), ``schema`` (route table and messages from the API descriptor),
``jsonmap`` (the browser's requests -> protobuf; answers come rendered by the sidecar), ``sidecar``
(process management), ``static_files`` (the built frontend).
"""

__version__ = "0.1.0"
