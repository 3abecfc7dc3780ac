"""``servesim dashboard``: start the Streamlit app on 127.0.0.1 and say where it is.

The process becomes Streamlit (``os.execv``), so signals sent to ``servesim dashboard``
stop the server itself.

Streamlit is imported only here, when the command runs, so other commands start fast
and work without the ``dashboard`` extra.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dashboard

APP = Path(dashboard.__file__).resolve().parent / "app.py"
ADDRESS = "127.0.0.1"  # loopback unless told otherwise (design: reliability and safety)
# upload limit in MB, as dashboard.logic.uploads.MAX_UPLOAD_BYTES (which AppTest runs check)


def streamlit_args(port: int, address: str = ADDRESS) -> list[str]:
    """The command line that serves the app headless on ``address:port``."""
    return [sys.executable, "-m", "streamlit", "run", str(APP),
            "--server.address", address, "--server.port", str(port),
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none", "--server.maxUploadSize", "50"]


def dashboard_command(port: int) -> int:
    """Serve the dashboard until interrupted; 2 if streamlit is missing or the port is bad."""
    if not 1 <= port <= 65535:
        print(f"servesim: error: --port {port}: must be in 1..65535", file=sys.stderr)
        return 2
    try:
        import plotly  # noqa: F401
        import streamlit  # noqa: F401
    except ImportError as e:
        print(f"servesim: error: the dashboard needs the dashboard extra ({e.name} is missing): "
              "pip install -e '.[dashboard]'", file=sys.stderr)
        return 2
    print(f"servesim dashboard: http://{ADDRESS}:{port}  (Ctrl-C stops it)", flush=True)
    sys.stderr.flush()
    args = streamlit_args(port)
    # Streamlit takes over this process: SIGTERM (docker stop, systemd) and Ctrl-C reach
    # it directly, and no child is left serving the port when servesim is stopped.
    os.execv(args[0], args)
