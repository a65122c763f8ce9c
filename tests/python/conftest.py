import pytest

# python_harness first: it puts tests/integration (harness.py) on sys.path.
from python_harness import HOROVODRUN, PACKAGE_DIR, PYTHON, package_env
from harness import Run  # noqa: E402


def pytest_collection_modifyitems(config, items):
    missing = [p for p in (HOROVODRUN, PACKAGE_DIR / "horovodd") if not p.exists()]
    if missing:
        raise pytest.UsageError(f"build first (scripts/test.sh does): missing {missing}")


@pytest.fixture
def python_job(tmp_path):
    """start(horovodrun_args, script, *script_args, env=None): runs
    horovodrun ... /usr/bin/python3 script ... in tmp_path with the package
    from the build tree; kills whatever is left at the end, by PID."""
    runs = []

    def start(horovodrun_args, script, *script_args, env=None):
        args = [*horovodrun_args, PYTHON, script, *script_args]
        run = Run(args, cwd=tmp_path, env=package_env(env))
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.cleanup()
