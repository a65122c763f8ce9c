"""What the Python binding's tests share: Debian's /usr/bin/python3 with the
horovodd package from the build tree (<build>/python), and
tests/integration/harness.py for running horovodrun."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from harness import BUILD, DISCOVER_HOSTS, HOROVODRUN, REPO  # noqa: E402,F401

PYTHON = "/usr/bin/python3"
PACKAGE_DIR = BUILD / "python"
WORKERS = Path(__file__).resolve().parent / "workers"


def package_env(extra=None):
    """The environment that makes /usr/bin/python3 import horovodd from the
    build tree (horovodrun passes it on to the workers)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PACKAGE_DIR), os.environ.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env
