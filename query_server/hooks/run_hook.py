"""``<python> -S <this file> <Event>``: a Claude Code hook without the interpreter's site step.

The hooks import only the standard library and this project's stdlib-only store readers
(``query_server.hooks.dispatch``), so they need nothing ``site`` does: processing
site-packages' ``.pth`` files costs ~20 ms of every interpreter start here (an editable
install's import finder most of it), two thirds of a bare ``python -c pass``. ``codemem init``
writes this form whenever it writes the interpreter's absolute path anyway. This file puts the
directory that holds ``query_server`` (the checkout, or site-packages) first on ``sys.path`` and
runs the hook (answered by the project's server when one runs: ``query_server.hooks.relay``); a
worker the hook starts (``sys.executable -m …``) gets the full interpreter.
"""

import sys

if __file__.startswith("/"):  # not os.path: importing os costs ~3 ms here (query_server.hooks.relay)
    sys.path[0] = __file__.rsplit("/", 3)[0] or "/"
else:
    import os

    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from query_server.hooks.relay import run_and_exit  # noqa: E402 - after the path it is found on

run_and_exit(sys.argv[1:])
