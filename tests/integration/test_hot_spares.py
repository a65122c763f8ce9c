"""Hot spares (issue 35, horovodrun --hot-spares N): spare workers started up to their
rendezvous, outside the job, that take a failed worker's place in one reset at the same size.
Real horovodrun (embedded daemon) or standalone daemons, real elastic_train workers on this
machine under three host names (localhost, 127.0.0.1 and its hostname), real SIGKILLs; every
process is ended by PID."""

import os
import re
import signal
import socket

from harness import assert_succeeded
from harness import (DISCOVER_HOSTS, ELASTIC_TRAIN, HostsFile, _pid_alive, daemons,  # noqa: F401
                     read_result, submit_elastic_train, wait_for, wait_pid_gone)

A, B, C = "localhost", "127.0.0.1", socket.gethostname()
SAMPLES = 4096
READY = re.compile(r"generation (\d+) ready: size (\d+) on (\S+)")
SPARE_STARTED = re.compile(r"started spare (\d+) on (\S+) \(pid (\d+)\)")


def spare_run(horovodrun, tmp_path, hosts, *options, epochs=6, delay_ms=25):
    """elastic_train with --hot-spares on the hosts `hosts` lists (a discovery script)."""
    HostsFile(tmp_path, hosts)
    return horovodrun("--verbose", "--start-timeout", 120, "--host-discovery-script",
                      DISCOVER_HOSTS, "--discovery-interval", "0.2", *options, ELASTIC_TRAIN,
                      "--epochs", epochs, "--samples", SAMPLES, "--step-delay-ms", delay_ms,
                      "--output", tmp_path / "result.json")


def readies(run):
    return [(int(m.group(1)), int(m.group(2)), m.group(3).split(","))
            for m in (READY.search(l) for l in list(run.lines)) if m]


def spares_started(run):
    """[(worker id, host, pid)] of every spare started."""
    return [(int(m.group(1)), m.group(2), int(m.group(3)))
            for m in (SPARE_STARTED.search(l) for l in list(run.lines)) if m]


def wait_spare_ready(run, host, other_than=()):
    """Waits for a spare on `host` (not one of `other_than`) to wait to join; (id, pid)."""
    def ready(lines):
        started = {sid: pid for sid, h, pid in spares_started(run) if h == host}
        for line in lines:
            m = re.search(r"spare (\d+) on (\S+) is ready", line)
            if m and m.group(2) == host and int(m.group(1)) not in other_than:
                sid = int(m.group(1))
                if sid in started:
                    return sid, started[sid]
        return None
    return run.wait_for(ready, f"a spare on {host} to be ready")


def generation_pids(run, generation, size):
    """{rank: pid} of `generation` once all of its `size` ranks printed theirs."""
    def complete(_lines):
        workers = run.workers(generation)
        return workers if len(workers) == size else None
    return run.wait_for(complete, f"generation {generation}'s {size} ranks")


def first_generation_and_ready_spare(run, hosts, spare_host):
    """Waits for the first generation (size 2 on `hosts`), a ready spare on `spare_host` and
    the first epoch's end; (first generation, its {rank: pid}, spare id, spare pid)."""
    run.wait_for(lambda _l: readies(run), "the first generation")
    first = readies(run)[0]
    assert first[1:] == (2, hosts), run.output()
    pids = generation_pids(run, first[0], 2)
    spare_id, spare_pid = wait_spare_ready(run, spare_host)
    run.wait_for_line(r"epoch 1/6", "the first epoch to end")
    return first, pids, spare_id, spare_pid


def check_result(tmp_path, epochs, final_size, resets):
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == epochs
    assert result["samples_per_epoch"] == [SAMPLES] * epochs  # every sample, once an epoch
    assert result["final_size"] == final_size
    assert result["resets"] == resets
    return result


def test_a_killed_worker_is_replaced_by_the_spare_in_one_reset_at_the_same_size(horovodrun,
                                                                                tmp_path):
    # The job trains on localhost and 127.0.0.1 (--max-np 2); the spare goes to the host
    # without a member. Rank 1 is killed: its host is blacklisted as in Horovod, the spare
    # takes rank 1 in one reset at size 2, and a new spare starts on the slot left.
    run = spare_run(horovodrun, tmp_path, f"{A}:1\n{B}:1\n{C}:2", "-np", 2, "--min-np", 1,
                    "--max-np", 2, "--hot-spares", 1)
    first, before, spare_id, spare_pid = first_generation_and_ready_spare(run, [A, B], C)

    os.kill(before[1], signal.SIGKILL)
    run.wait_for_line(rf"horovodrun: spare {spare_id} on {re.escape(C)} took rank 1 ",
                      "horovodrun to say which spare took which rank")
    second = run.wait_for(lambda _l: [r for r in readies(run) if r[0] > first[0]],
                          "the next generation")[0]
    assert second[1:] == (2, [A, C]), run.output()
    after = generation_pids(run, second[0], 2)
    assert after == {0: before[0], 1: spare_pid}
    # A new spare, on the slot the old one's promotion left, once the generation formed.
    wait_spare_ready(run, C, other_than=(spare_id,))

    assert run.wait() == 0, run.output()
    assert [r[1] for r in readies(run)] == [2, 2], run.output()  # one reset, never smaller
    assert run.count(r"reset took \d+ ms") == 1
    check_result(tmp_path, 6, 2, resets=1)
    for _sid, _host, pid in spares_started(run):
        wait_pid_gone(pid)


def test_a_killed_spare_is_replaced_without_a_reset(horovodrun, tmp_path):
    # The job fills localhost's two slots; the spare goes to 127.0.0.1 (no members). Killed,
    # it blacklists its host (Horovod's rule for a failed process) and the next spare starts
    # on the host left, with no reset of the job.
    run = spare_run(horovodrun, tmp_path, f"{A}:2\n{B}:1\n{C}:1", "-np", 2, "--min-np", 1,
                    "--max-np", 2, "--hot-spares", 1)
    spare_id, spare_pid = wait_spare_ready(run, B)
    run.wait_for_line(r"epoch 1/6", "the first epoch to end")
    os.kill(spare_pid, signal.SIGKILL)
    run.wait_for_line(rf"spare {spare_id} on {re.escape(B)} killed by signal 9",
                      "the spare's death to be seen")
    wait_spare_ready(run, C, other_than=(spare_id,))
    assert run.wait() == 0, run.output()
    assert len(readies(run)) == 1, run.output()
    assert "reset took" not in run.output()
    check_result(tmp_path, 6, 2, resets=0)


def test_losing_the_host_of_a_worker_and_the_spare_blacklists_it_as_today(horovodrun,
                                                                         tmp_path):
    # 127.0.0.1 has the only free slot, so the spare shares it with rank 1. Both die at once
    # (the host is "lost"): the host is blacklisted, its spare leaves, and the job goes on at
    # the size the remaining slots allow (1, on localhost).
    run = spare_run(horovodrun, tmp_path, f"{A}:1\n{B}:2", "-np", 2, "--min-np", 1,
                    "--max-np", 2, "--hot-spares", 1)
    _first, before, _spare_id, spare_pid = first_generation_and_ready_spare(run, [A, B], B)
    os.kill(before[1], signal.SIGKILL)
    os.kill(spare_pid, signal.SIGKILL)
    assert run.wait() == 0, run.output()
    assert [(r[1], r[2]) for r in readies(run)][-1] == (1, [A]), run.output()
    assert run.count(r"host 127\.0\.0\.1 is blacklisted for the rest of the job") >= 1
    assert "took rank" not in run.output()
    check_result(tmp_path, 6, 1, resets=1)


def test_more_spares_than_slots_start_with_what_fits_and_say_so_once(horovodrun, tmp_path):
    run = spare_run(horovodrun, tmp_path, f"{A}:3", "-np", 2, "--min-np", 1,
                    "--hot-spares", 3, epochs=3)
    wait_spare_ready(run, A)
    assert run.wait() == 0, run.output()
    assert [r[1] for r in readies(run)] == [2], run.output()
    assert run.count(r"--hot-spares 3: the usable slots beyond the job's hold 1 spare\(s\)") == 1
    assert len(spares_started(run)) == 1
    check_result(tmp_path, 3, 2, resets=0)
    for _sid, _host, pid in spares_started(run):
        wait_pid_gone(pid)


def test_spares_live_through_a_daemon_sigkill_and_restart(daemons, tmp_path):
    # The spare is a worker like the others for the shims and the journal: the restarted
    # daemon takes it back, and it still takes a killed worker's place.
    HostsFile(tmp_path, f"{A}:1\n{B}:1\n{C}:1")
    daemon = daemons.start()
    job_id = submit_elastic_train(daemon, tmp_path, epochs=30, delay_ms=15, samples=SAMPLES,
                                  min_np=1, extra=("--hot-spares", 1))

    def spare_ready(d):
        def ready():
            status = d.status(job_id)
            spares = [w for w in status.get("workers", [])
                      if w.get("state") == "WORKER_SPARE_READY"]
            return spares[0] if spares and status.get("last_commit", 0) > 0 else None
        return wait_for(ready, "a ready spare")

    spare = spare_ready(daemon)
    assert spare["host"] == C
    ranks = {w["rank"]: w["pid"] for w in daemon.status(job_id)["workers"]
             if w.get("state") == "WORKER_RUNNING"}
    assert sorted(ranks) == [0, 1]

    daemon = daemons.restart(daemon, signal.SIGKILL)
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    assert spare_ready(daemon)["pid"] == spare["pid"]

    os.kill(ranks[1], signal.SIGKILL)
    def swapped():
        status = daemon.status(job_id)
        by_rank = {w["rank"]: w for w in status.get("workers", []) if w.get("rank", -1) >= 0}
        return status if (status.get("state") == "RUNNING" and 1 in by_rank
                          and by_rank[1]["pid"] == spare["pid"]) else None
    status = wait_for(swapped, "the spare to take rank 1")
    assert status["size"] == 2
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) == 1, final
    result = read_result(tmp_path / "result.json")
    assert result["samples_per_epoch"] == [SAMPLES] * 30
    for w in final["workers"]:
        wait_pid_gone(w["pid"])
