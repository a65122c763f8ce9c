"""Where a job's time goes (issue #34, part 5): a PyTorch elastic job (elastic_probe.py) under
horovodrun with its embedded daemon, read through the status page's API that horovodrun prints a
link to. One of its three workers is SIGKILLed; the job resets and trains on at two. The parts of
its goodput add up to its wall time within 1%, the failure shows as detection, replay of the work
since the last commit and a reset, and training is most of the job's time."""

import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from harness import BUILD, EVENT_DEADLINE, wait_for
from test_horovodctl import discovery_script

PYTHON = "/usr/bin/python3"
PROBE = Path(__file__).resolve().parent / "elastic_probe.py"
PARTS = ("training", "starting", "waiting", "detection", "reset", "replay", "stall")


def page_api(base, token, path):
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=EVENT_DEADLINE) as reply:
        return json.loads(reply.read())


def seconds(goodput):
    return {part: goodput[f"{part}_seconds"] for part in PARTS}


def assert_adds_up(job, now):
    """The parts add up to the wall time, which is the job's age when it was asked."""
    g = job["goodput"]
    assert sum(seconds(g).values()) == pytest.approx(g["wall_seconds"], rel=0.01), g
    assert all(v >= 0 for v in seconds(g).values()), g
    age = now - job["started_unix"]
    assert abs(g["wall_seconds"] - age) <= 0.01 * age + 0.5, (g, age)
    assert g["goodput"] == pytest.approx(g["training_seconds"] / g["wall_seconds"], rel=0.01)


def test_a_lost_worker_costs_detection_replay_and_a_reset_and_the_parts_add_up(
        horovodrun, tmp_path):
    script, _ = discovery_script(tmp_path / "discovery", "127.0.0.1:2\nlocalhost:1")
    stop = tmp_path / "stop"
    run = horovodrun("-np", 3, "--min-np", 2, "--max-np", 3,
                     "--host-discovery-script", script, "--start-timeout", 120,
                     "--env", f"PYTHONPATH={BUILD / 'python'}",
                     PYTHON, PROBE, "--epochs", 1, "--batches", 10, "--step-delay-ms", 200,
                     "--stop-file", stop, "--marker-dir", tmp_path)
    link = run.wait_for_line(r"horovodrun: status page: (http://127\.0\.0\.1:\d+/)#token=(\w+)$",
                             "the status page's link")
    base, token = link.group(1), link.group(2)

    def job():
        jobs = page_api(base, token, "api/jobs")["jobs"]
        return page_api(base, token, f"api/jobs/{jobs[0]['job_id']}") if jobs else None

    def status_when(predicate):
        def check():
            status = job()
            return status if status and predicate(status) else None
        return wait_for(check, "the job's status", EVENT_DEADLINE)

    def others(g):
        return sum(v for part, v in seconds(g).items() if part != "training")

    # Three ranks train until training is well ahead of the job's start.
    status_when(lambda s: s["state"] == "RUNNING" and s["size"] == 3)
    before = status_when(lambda s: s["goodput"]["training_seconds"] >
                         others(s["goodput"]) + 5)
    assert_adds_up(before, time.time())
    assert before["goodput"]["starting_seconds"] > 0
    for part in ("detection", "reset", "replay"):
        assert before["goodput"][f"{part}_seconds"] == 0, before["goodput"]

    victim = next(w for w in before["workers"] if w["host"] == "localhost")
    os.kill(victim["pid"], signal.SIGKILL)

    # The reset ends with training resumed at two ranks; then it trains on.
    after = status_when(lambda s: s["resets"] >= 1 and s["state"] == "RUNNING" and s["size"] == 2
                        and s["reset_history"][-1]["resumed_unix"] > 0)
    g = after["goodput"]
    assert g["detection_seconds"] > 0, g
    assert g["replay_seconds"] > 0, g
    assert g["reset_seconds"] > 0, g
    assert g["training_seconds"] > before["goodput"]["training_seconds"], g
    # The reset as the ledger counts it lies within the reset history's detected -> resumed.
    record = after["reset_history"][-1]
    assert g["reset_seconds"] <= record["resumed_unix"] - record["detected_unix"] + 0.05, \
        (g, record)
    assert_adds_up(after, time.time())

    latest = status_when(lambda s: s["goodput"]["training_seconds"] > 2 * others(s["goodput"]))
    assert_adds_up(latest, time.time())
    g = latest["goodput"]
    assert max(seconds(g), key=seconds(g).get) == "training", g
    assert g["goodput"] > 0.5, g
    print("goodput after the loss:", json.dumps(g, indent=1))

    stop.touch()
    assert run.wait() == 0, "\n".join(run.lines[-40:])
