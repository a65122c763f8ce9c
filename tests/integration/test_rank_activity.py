"""What each rank is doing, as the daemon hears it on the workers' heartbeats
(issue #34, part 1): a 2-rank PyTorch job (late_rank.py) whose rank 1 is late
for an allreduce. `horovodctl status --output json` shows rank 0 waiting in
that allreduce, by name, and rank 1 in none; the table and /metrics show the
same; once rank 1 submits it, neither waits and the completed counts rise."""

import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from harness import BUILD, EVENT_DEADLINE, HOROVODRUN, kill_shims, wait_for
from test_horovodctl import CLI_DEADLINE, ctl, ctl_json, members, wait_status
from test_security import OwnDaemon

PYTHON = "/usr/bin/python3"
LATE_RANK = Path(__file__).resolve().parent / "late_rank.py"


class MetricsDaemon(OwnDaemon):
    """A horovodd with its /metrics on a free port (conftest's turns it off)."""

    def __init__(self, tmp_path):
        self.state_dir = tmp_path / "horovodd-state"
        super().__init__(tmp_path, "horovodd", "--listen", "127.0.0.1:0",
                         "--metrics-listen", "127.0.0.1:0")

    def client_args(self):
        return ["--daemon", self.address, "--token-file", str(self.state_dir / "admin.token")]


@pytest.fixture
def metrics_daemon(tmp_path):
    daemon = MetricsDaemon(tmp_path)
    yield daemon
    daemon.stop()
    # SIGTERM leaves a running job to the next daemon, under its shims.
    kill_shims(tmp_path)


def submit(daemon, *args, cwd):
    """horovodrun --daemon ... --detach ARGS: the job's id."""
    result = subprocess.run([str(HOROVODRUN), *daemon.client_args(), "--detach",
                             *map(str, args)], cwd=cwd, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=CLI_DEADLINE)
    assert result.returncode == 0, result.stderr + daemon.log()
    return result.stdout.strip()


def metrics_page(daemon):
    with urllib.request.urlopen(f"http://{daemon.metrics}/metrics",
                                timeout=EVENT_DEADLINE) as reply:
        return reply.read().decode()


def sample(page, name, job, rank):
    match = re.search(rf'^{name}{{job="{job}",rank="{rank}"}} (\S+)$', page, re.M)
    return float(match.group(1)) if match else None


def waiting(worker):
    """The collective a worker's report says it waits in (None: none, or no report)."""
    if not worker["activity_unix"]:
        return None
    wait = worker["activity"]["waiting"]
    return wait if wait["operation"] else None


def test_status_shows_the_rank_that_waits_and_the_one_it_waits_for(metrics_daemon, tmp_path):
    daemon = metrics_daemon
    release, done = tmp_path / "release", tmp_path / "done"
    job = submit(daemon, "-np", 2, "-H", "localhost:2", "--start-timeout", 120,
                 "--env", f"PYTHONPATH={BUILD / 'python'}",
                 PYTHON, LATE_RANK, release, done, cwd=tmp_path)
    try:
        # Rank 0 waits in the late allreduce (its report says so) and rank 1,
        # once its report is newer than its warm-up, waits in nothing.
        def rank0_waits(status):
            ranks = members(status)
            return (status["state"] == "RUNNING" and len(ranks) == 2
                    and (waiting(ranks[0]) or {}).get("name") == "rank1.is.late"
                    and ranks[1]["activity_unix"] > 0
                    and ranks[1]["activity"]["last_commit"] == 3
                    and waiting(ranks[1]) is None)
        status = wait_status(daemon, job, rank0_waits, "rank 0 waiting in rank1.is.late")
        ranks = members(status)
        wait = waiting(ranks[0])
        assert wait["operation"] == "allreduce"
        assert wait["process_set"] == 0
        assert wait["waited_seconds"] >= 0
        assert 0 < wait["since_unix"] <= ranks[0]["activity_unix"]
        assert waiting(ranks[1]) is None
        # Both finished the warm-up: three allreduces and three commits each.
        for rank in (0, 1):
            assert ranks[rank]["activity"]["completed"] >= 3
            assert ranks[rank]["activity"]["last_commit"] == 3
            assert ranks[rank]["activity"]["step_seconds"] > 0
        before = {rank: ranks[rank]["activity"]["completed"] for rank in (0, 1)}

        # The table says the same, and /metrics has rank 0's wait.
        table = ctl(daemon, "status", job)
        assert table.returncode == 0, table.stderr
        assert "WAITS IN" in table.stdout
        assert "allreduce rank1.is.late" in table.stdout, table.stdout
        page = metrics_page(daemon)
        assert sample(page, "horovodd_rank_wait_seconds", job, 0) is not None
        assert sample(page, "horovodd_rank_wait_seconds", job, 1) == 0
        assert sample(page, "horovodd_rank_last_commit", job, 1) == 3
        assert sample(page, "horovodd_rank_collectives_completed", job, 0) >= 3

        # Rank 1 arrives: nobody waits, and both count what they completed since.
        release.touch()

        def both_moved_on(status):
            ranks = members(status)
            return (len(ranks) == 2
                    and all(ranks[r]["activity_unix"] > 0 and waiting(ranks[r]) is None
                            and ranks[r]["activity"]["completed"] > before[r]
                            and ranks[r]["activity"]["last_commit"] == 6 for r in (0, 1)))
        wait_status(daemon, job, both_moved_on, "both ranks past the late allreduce")
    finally:
        done.touch()
        release.touch()
    wait_for(lambda: ctl_json(daemon, "status", job)["state"] == "SUCCEEDED",
             "the job to succeed")
