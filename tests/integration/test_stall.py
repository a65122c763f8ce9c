"""Hung and slow ranks (issue #34, parts 2-4), with real processes and signals: PyTorch elastic
jobs (stall_probe.py) in which one rank sleeps inside its step while its heartbeat thread runs,
or lags every step. The daemon names the rank the others wait for within the stall warning time
plus a second (read from the job's event timestamps, not from sleeps here); past the shutdown
time it evicts it in an elastic job (its host blacklisted, the job finishing at the smaller size
with every sample of every epoch exactly once) and fails a fixed-size job naming it. A long step
under the warning time raises nothing; a straggler is shown per rank and evicted only with
--evict-stragglers."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from harness import BUILD, JOB_DEADLINE, kill_shims, read_result, wait_for
from test_horovodctl import CLI_DEADLINE, ctl, ctl_json, members, wait_status
from test_rank_activity import MetricsDaemon, metrics_page, sample, submit

PYTHON = "/usr/bin/python3"
PROBE = Path(__file__).resolve().parent / "stall_probe.py"
A, B = "localhost", "127.0.0.1"
SAMPLES = 384
EPOCHS = 2
# Short stall times, so the tests take seconds; the rules are the same at Horovod's 60.
WARNING, SHUTDOWN = 4, 8


@pytest.fixture
def daemon(tmp_path):
    d = MetricsDaemon(tmp_path)
    yield d
    d.stop()
    kill_shims(tmp_path)


def probe(daemon, tmp_path, *options, probe_args=(), epochs=EPOCHS):
    return submit(daemon, "--start-timeout", 120, "--env", f"PYTHONPATH={BUILD / 'python'}",
                  *options, PYTHON, PROBE, "--marker-dir", tmp_path, "--samples", SAMPLES,
                  "--epochs", epochs, "--output", tmp_path / "result.json", *probe_args,
                  cwd=tmp_path)


def events(daemon, job):
    """Every event of the job so far (horovodctl watch --output json, once it has ended)."""
    result = subprocess.run(
        [str(BUILD / "bin" / "horovodctl"), *daemon.client_args(), "--output", "json",
         "watch", job], capture_output=True, text=True, timeout=JOB_DEADLINE)
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def ended(daemon, job):
    try:
        return wait_for(lambda: (lambda s: s if s["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")
                                 else None)(ctl_json(daemon, "status", job)),
                        "the job to end", timeout=JOB_DEADLINE)
    except AssertionError as timed_out:
        # Say where it was: its state, its ranks and its last events.
        status = ctl_json(daemon, "status", job)
        ranks = [(w.get("rank"), w.get("host"), w.get("state"), w.get("activity"))
                 for w in status.get("workers", [])]
        recent = [e.get("message") for e in status.get("recent_events", [])][-20:]
        # A rank that failed on its own: its last output says why.
        failed = {w.get("rank"): ctl(daemon, "logs", job, w.get("rank"), "-n", 30).stdout
                  for w in status.get("workers", []) if w.get("state") == "WORKER_FAILED"}
        raise AssertionError(f"{timed_out}: state {status.get('state')}, generation "
                             f"{status.get('generation')}, ranks {ranks}, events {recent}, "
                             f"output of failed ranks {failed}") from None


def with_code(evs, code):
    return [e for e in evs if e.get("code") == code]


def sleeper(tmp_path, rank, step):
    """(pid, host) of the worker that slept, from its marker."""
    marker = tmp_path / f"slept-{rank}-{step}"
    wait_for(lambda: marker.exists() and marker.read_text(), "the sleeper's marker")
    pid, host = marker.read_text().split()
    return int(pid), host


def assert_named(stall_event, pid, host):
    stall = stall_event["stall"]
    assert stall["kind"] == "missing", stall
    assert [(c["rank"], c["host"], c["pid"]) for c in stall["culprits"]] == [(1, host, pid)]
    culprit = stall["culprits"][0]
    assert "commit" in culprit["last_did"] and culprit["last_commit"] > 0, culprit
    assert culprit["last_commit_unix"] > 0
    # The collective the others wait in, and since when: named within warning + 1 s.
    assert stall["collective"]["operation"] == "allgather", stall
    assert 1 not in stall["waiting_ranks"] and len(stall["waiting_ranks"]) >= 1
    since = stall["collective"]["since_unix"]
    named = stall_event["time_unix"]
    assert WARNING <= named - since <= WARNING + 1, (named, since)
    assert stall["named_unix"] == pytest.approx(named, abs=0.05)


def test_a_hung_rank_is_named_evicted_and_the_job_finishes_smaller(daemon, tmp_path):
    # 4 ranks on two hosts; rank 1 (localhost) sleeps an hour inside step 8 (mid-epoch 1).
    job = probe(daemon, tmp_path, "-np", 4, "--min-np", 2, "-H", f"{A}:2,{B}:2",
                "--stall-check-warning-time-seconds", WARNING,
                "--stall-check-shutdown-time-seconds", SHUTDOWN,
                probe_args=("--sleep", "1:8:3600"))
    pid, host = sleeper(tmp_path, 1, 8)
    # While it hangs, status names it (the table and the JSON).
    status = wait_status(daemon, job, lambda s: "stall" in s and s["stall"]["culprits"],
                         "the stall in the status")
    assert status["stall"]["culprits"][0]["pid"] == pid
    table = ctl(daemon, "status", job)
    assert "Stall:" in table.stdout and str(pid) in table.stdout, table.stdout
    final = ended(daemon, job)
    evs = events(daemon, job)
    assert final["state"] == "SUCCEEDED", (final["reason"], [e["message"] for e in evs][-40:])
    named = with_code(evs, "stall")
    assert len(named) == 1, [e["message"] for e in named]
    assert_named(named[0], pid, host)
    assert f"rank 1 ({host}, pid {pid}" in named[0]["message"]
    # Evicted once the stall lasted the shutdown time: SIGTERM; its exit a failure.
    evict = with_code(evs, "stall_evict")
    assert len(evict) == 1
    since = named[0]["stall"]["collective"]["since_unix"]
    assert SHUTDOWN <= evict[0]["time_unix"] - since <= SHUTDOWN + 1
    evicted = with_code(evs, "worker_evicted")
    assert len(evicted) == 1 and f"pid {pid}" in evicted[0]["message"], evicted
    lost = [e["message"] for e in evs if e.get("code") == "worker_lost"]
    assert any(f"pid {pid}" in m and "killed by signal 15" in m and
               f"host {host} is blacklisted" in m for m in lost), lost
    assert {h["host"]: h["state"] for h in final["hosts"]}[host] != "usable", final["hosts"]
    # The job went on at the smaller size, every sample of every epoch exactly once.
    result = read_result(tmp_path / "result.json")
    assert result["final_size"] == 2
    assert result["epochs_completed"] == EPOCHS
    assert result["samples_per_epoch"] == [SAMPLES] * EPOCHS
    assert result["distinct_samples_per_epoch"] == [SAMPLES] * EPOCHS
    assert final["resets"] >= 1
    # The waiting ranks did not shut themselves down (the daemon acts on stalls), though
    # their own stall check warned.
    assert not [e for e in evs if "stall check shut the job down" in e["message"]]


def test_a_hung_rank_fails_a_fixed_size_job_naming_it(daemon, tmp_path):
    job = probe(daemon, tmp_path, "-np", 2, "-H", f"{A}:2",
                "--stall-check-warning-time-seconds", WARNING,
                "--stall-check-shutdown-time-seconds", SHUTDOWN,
                probe_args=("--sleep", "1:4:3600"))
    pid, host = sleeper(tmp_path, 1, 4)
    final = ended(daemon, job)
    assert final["state"] == "FAILED", final
    assert f"rank 1 ({host}, pid {pid}" in final["reason"], final["reason"]
    assert "stall" in final["reason"]
    evs = events(daemon, job)
    named = with_code(evs, "stall")
    assert len(named) == 1
    assert_named(named[0], pid, host)
    assert "the job fails if it lasts" in named[0]["message"]


def test_a_long_step_under_the_warning_time_is_no_stall(daemon, tmp_path):
    # Rank 1 takes 2 s (half the warning time) in three of its steps: no event, no eviction.
    job = probe(daemon, tmp_path, "-np", 2, "--min-np", 1, "-H", f"{A}:2",
                "--stall-check-warning-time-seconds", WARNING,
                "--stall-check-shutdown-time-seconds", SHUTDOWN,
                probe_args=("--sleep", "1:3:2", "--sleep", "1:5:2", "--sleep", "1:7:2"))
    final = ended(daemon, job)
    evs = events(daemon, job)
    assert final["state"] == "SUCCEEDED", final
    assert not with_code(evs, "stall") and not with_code(evs, "stall_evict"), \
        [e["message"] for e in evs if e["kind"] != "OUTPUT"]
    assert not with_code(evs, "worker_evicted")
    assert final["resets"] == 0
    for step in (3, 5, 7):
        assert (tmp_path / f"slept-1-{step}").exists()


def straggler_job(daemon, tmp_path, *options, epochs):
    # Spawn rank 0, alone on localhost, sleeps 250 ms more each step than the others.
    return probe(daemon, tmp_path, "-np", 3, "--min-np", 2, "-H", f"{A}:1,{B}:2", *options,
                 probe_args=("--slow", "0:250", "--step-delay-ms", 10, "--batch-size", 4),
                 epochs=epochs)


def shows_straggler(status):
    ranks = members(status)
    return (status["state"] == "RUNNING" and len(ranks) == 3 and ranks[0]["straggler"]
            and ranks[0]["lost_seconds_per_step"] > 0.1
            and not ranks[1]["straggler"] and not ranks[2]["straggler"])


def test_a_straggler_is_shown_and_not_evicted_by_default(daemon, tmp_path):
    job = straggler_job(daemon, tmp_path, epochs=1000)
    try:
        status = wait_status(daemon, job, shows_straggler, "rank 0 shown as a straggler")
        lost = members(status)[0]["lost_seconds_per_step"]
        assert 0.1 < lost < 1.0, lost
        page = metrics_page(daemon)
        assert sample(page, "horovodd_rank_straggler", job, 0) == 1
        assert sample(page, "horovodd_rank_straggler", job, 1) == 0
        assert sample(page, "horovodd_rank_lost_seconds_per_step", job, 0) > 0.1
        table = ctl(daemon, "status", job)
        assert "LOST/STEP" in table.stdout and "straggler" in table.stdout, table.stdout
        # Past the eviction window (10 s) and more, nobody is evicted without the flag.
        first = status
        wait_status(daemon, job,
                    lambda s: s["state"] != "RUNNING" or
                    members(s)[0]["activity"]["last_commit"] >=
                    members(first)[0]["activity"]["last_commit"] + 60,
                    "sixty more steps")
        status = ctl_json(daemon, "status", job)
        assert status["resets"] == 0
        assert not [w for w in status["workers"] if w["state"] == "WORKER_FAILED"]
    finally:
        ctl(daemon, "cancel", job)
        ended(daemon, job)


def test_evict_stragglers_evicts_the_slow_rank(daemon, tmp_path):
    # 4 epochs: 128 steps at size 3 (about 35 s), well past the 10 s eviction window.
    job = straggler_job(daemon, tmp_path, "--evict-stragglers", 2, epochs=4)
    final = ended(daemon, job)
    evs = events(daemon, job)
    assert final["state"] == "SUCCEEDED", (final["reason"], [e["message"] for e in evs
                                                             if e["kind"] != "OUTPUT"][-30:])
    evicted = with_code(evs, "worker_evicted")
    assert len(evicted) == 1, [e["message"] for e in evicted]
    assert "(rank 0, localhost" in evicted[0]["message"]
    assert "straggler (--evict-stragglers 2)" in evicted[0]["message"]
    result = read_result(tmp_path / "result.json")
    assert result["final_size"] == 2
    assert result["samples_per_epoch"] == [SAMPLES] * 4
    assert result["distinct_samples_per_epoch"] == [SAMPLES] * 4
