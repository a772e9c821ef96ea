"""codemem benchmarks: retrieval quality and indexing throughput (see docs/benchmarks.md).

A benchmark never writes into the user's own global memory scope (``~/.codemem/global``): the
memories it adds there (preferences are global by default) go to a temporary folder, removed at
exit, for the benchmark and every process it starts.
"""

import atexit
import os
import shutil
import tempfile

_GLOBAL_DIR = tempfile.mkdtemp(prefix="codemem-bench-global-")
os.environ["CODEMEM_GLOBAL_DIR"] = _GLOBAL_DIR
atexit.register(shutil.rmtree, _GLOBAL_DIR, True)
