import pytest

from harness import ELASTIC_TRAIN, HOROVODRUN, Run


def pytest_collection_modifyitems(config, items):
    missing = [p for p in (HOROVODRUN, ELASTIC_TRAIN) if not p.exists()]
    if missing:
        raise pytest.UsageError(f"build first (scripts/test.sh does): missing {missing}")


@pytest.fixture
def horovodrun(tmp_path):
    """Starts horovodrun runs in tmp_path; kills whatever is left at the end."""
    runs = []

    def start(*args, env=None, cwd=None):
        run = Run(args, cwd=cwd or tmp_path, env=env)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.cleanup()
