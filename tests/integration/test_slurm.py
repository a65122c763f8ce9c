"""horovodrun inside a real Slurm allocation: a private slurmctld and two
slurmd (node1, node2, both on this machine at 127.0.0.1, slurm_cluster.py).
Every job runs under `salloc -N2 --ntasks-per-node=2`, through a small wrapper
that reports horovodrun's pid and exit, then what Slurm still lists for the
allocation (its steps, its state), so the tests see what horovodrun left."""

import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from harness import ELASTIC_TRAIN, EVENT_DEADLINE, HOROVODRUN, JOB_DEADLINE, Run, \
    read_result, wait_pid_gone
from slurm_cluster import SlurmCluster

SAMPLES = 4096
READY_LINE = re.compile(r"generation (\d+) ready: size (\d+) on (\S+)")
EPOCH_AT_4 = re.compile(r"epoch (\d+)/\d+ loss \S+ size 4$")
# What the wrapper prints after horovodrun ends (see WRAPPER).
AFTER_LINE = re.compile(r"^after: exit (\d+) steps \[(.*)\] state (\S+)$")

# Runs horovodrun inside the allocation and reports on it afterwards; the
# allocation itself ends when this script does.
WRAPPER = """#!/bin/sh
"$@" &
pid=$!
echo "horovodrun pid $pid"
wait $pid
code=$?
# slurmctld retires a step a moment after its srun has seen it end: wait (up to
# 30 s) for the job's steps to go before reporting the ones left.
steps() { squeue -h -s -j "$SLURM_JOB_ID" -o '%i:%j' | grep -v -e '\\.extern' -e '\\.batch' | tr '\\n' ' '; }
tries=0
while steps | grep -q ':hvdd\\.' && [ $tries -lt 150 ]; do sleep 0.2; tries=$((tries + 1)); done
steps=$(steps)
state=$(scontrol -o show job "$SLURM_JOB_ID" | grep -o 'JobState=[A-Z]*')
echo "after: exit $code steps [$steps] state $state"
exit $code
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if not ELASTIC_TRAIN.exists():
        pytest.fail(f"build first: missing {ELASTIC_TRAIN}")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    cluster.start()
    yield cluster
    cluster.stop()


class SallocRun(Run):
    """horovodrun ARGS under `salloc -N2 --ntasks-per-node=2` and the wrapper."""

    def __init__(self, slurm, tmp_path, args, env=None):
        wrapper = tmp_path / "in_allocation.sh"
        wrapper.write_text(WRAPPER)
        wrapper.chmod(0o755)
        self.slurm = slurm
        self.args = ["salloc", "-N2", "--ntasks-per-node=2", str(wrapper), str(HOROVODRUN),
                     *[str(a) for a in args]]
        self.lines = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(self.args, cwd=tmp_path, env=slurm.env(**(env or {})),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self._readers = [threading.Thread(target=self._read, args=(s,), daemon=True)
                         for s in (self.proc.stdout, self.proc.stderr)]
        for r in self._readers:
            r.start()

    def job_id(self):
        return self.wait_for_line(r"Granted job allocation (\d+)", "the allocation").group(1)

    def horovodrun_pid(self):
        return int(self.wait_for_line(r"^horovodrun pid (\d+)$").group(1))

    def hosts_of(self, generation):
        """The nodes of a ready generation, by rank (needs --verbose)."""
        for m in READY_LINE.finditer(self.output()):
            if int(m.group(1)) == generation:
                return m.group(3).split(",")
        raise AssertionError(f"no ready line for generation {generation}:\n{self.output()}")

    def node_of(self):
        """{worker pid: node} over every generation seen so far."""
        nodes = {}
        for m in READY_LINE.finditer(self.output()):
            hosts = m.group(3).split(",")
            for rank, pid in self.workers(int(m.group(1))).items():
                nodes[pid] = hosts[rank]
        return nodes

    def after(self):
        """(horovodrun's exit, the steps left, the allocation's state) once it ended."""
        m = self.wait_for_line(AFTER_LINE.pattern, "horovodrun's end", JOB_DEADLINE)
        return int(m.group(1)), m.group(2).split(), m.group(3)

    def cleanup(self):
        # Our own allocation: cancelling it ends whatever a failed test left in it.
        m = re.search(r"Granted job allocation (\d+)", self.output())
        if m and self.proc.poll() is None:
            subprocess.run(["scancel", m.group(1)], env=self.slurm.env(), timeout=30)
        if self.proc.poll() is not None or self._exited_within(30):
            pass
        else:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        super().cleanup()

    def _exited_within(self, seconds):
        try:
            self.proc.wait(seconds)
            return True
        except subprocess.TimeoutExpired:
            return False


@pytest.fixture
def salloc(slurm, tmp_path):
    runs = []

    def start(*args, env=None):
        run = SallocRun(slurm, tmp_path, args, env)
        runs.append(run)
        return run
    yield start
    for run in runs:
        run.cleanup()
    # A test that drained a node gives it back, whatever happened.
    subprocess.run(["scontrol", "update", "nodename=node2", "state=resume"],
                   env=slurm.env(), capture_output=True, timeout=30)
    slurm.wait_nodes_idle(("node1", "node2"), EVENT_DEADLINE)


def train_args(tmp_path, epochs, delay_ms, extra=()):
    return [ELASTIC_TRAIN, "--epochs", epochs, "--samples", SAMPLES, "--step-delay-ms", delay_ms,
            "--output", tmp_path / "result.json", *extra]


def hvdd_steps(steps):
    return [s for s in steps if ":hvdd." in s]


def test_two_node_job_runs_srun_steps_on_both_nodes(salloc, slurm, tmp_path):
    run = salloc("-np", 4, "--verbose", *train_args(tmp_path, epochs=3, delay_ms=40))
    job = run.job_id()
    workers = run.wait_for_size(4)
    # Each worker is a step of the allocation, on the node the daemon chose.
    def four_steps(_):
        steps = [s for s in slurm.steps(job) if " hvdd." in s]
        return steps if len(steps) == 4 else None
    steps = run.wait_for(four_steps, "four hvdd steps in squeue")
    assert all(s.startswith(f"{job}.") for s in steps), steps
    # The workers print their ranks before horovodrun prints the generation's ready line.
    nodes = run.wait_for(lambda _: run.node_of() if all(p in run.node_of()
                                                        for p in workers.values()) else None,
                         "the ready line")
    assert sorted(nodes[pid] for pid in workers.values()) == ["node1", "node1", "node2", "node2"]
    code, left, state = run.after()
    assert code == 0, run.output()
    assert hvdd_steps(left) == [] and state == "JobState=RUNNING", run.output()
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 3 and result["final_size"] == 4
    assert result["weight_error"] < 0.01
    # NodeAddr reached the workers: no --network-interface was needed, and no
    # srun complaint made it into the output.
    assert "srun: error" not in run.output()


def test_drained_node_leaves_the_job_and_comes_back_when_resumed(salloc, slurm, tmp_path):
    # It trains until the node is back and the job trained on it (the stop
    # file then ends it at the next epoch), however long the drain takes here.
    stop_file = tmp_path / "stop"
    run = salloc("-np", 4, "--min-np", 2, "--host-discovery", "slurm", "--discovery-interval",
                 0.5, "--verbose", *train_args(tmp_path, epochs=10000, delay_ms=25,
                                               extra=("--stop-file", stop_file)))
    before = run.wait_for_size(4)
    run.wait_for_line(r"generation \d+ ready: size 4 on", "the ready line")
    hosts = run.node_of()
    on_node2 = sorted(pid for pid in before.values() if hosts[pid] == "node2")
    assert len(on_node2) == 2, run.output()

    slurm.scontrol("update", "nodename=node2", "state=drain", "reason=hvdd test")
    run.wait_for_line(r"hosts changed, now hosts node1:2$", "node2 to leave the host set")
    after = run.wait_for_size(2)
    # The job shrank onto node1: both survivors are node1's workers.
    assert {hosts.get(pid) for pid in after.values()} == {"node1"}, run.output()
    assert set(after.values()) <= set(before.values())
    for pid in on_node2:
        wait_pid_gone(pid)

    slurm.scontrol("update", "nodename=node2", "state=resume")
    run.wait_for_line(r"hosts changed, now hosts node1:2,node2:2$", "node2 to come back")
    grown = run.wait_for(
        lambda _: run.workers() if len(run.workers()) == 4 and
        len(set(run.workers().values()) - set(before.values())) == 2 else None,
        "the job to grow back to 4 with two new workers")
    run.wait_for(lambda _: all(p in run.node_of() for p in grown.values()), "the ready line")
    new_hosts = run.node_of()
    assert sorted(new_hosts[p] for p in grown.values() if p not in before.values()) == \
        ["node2", "node2"], run.output()
    # An epoch done at size 4 again, and enough epochs in all for the model
    # to converge (the two-node test's 3, and one more), before the stop.
    grown_at = len(run.lines)
    run.wait_for(lambda lines: any(int(m.group(1)) >= 4 for m in map(EPOCH_AT_4.search,
                                                                     lines[grown_at:]) if m),
                 "an epoch at size 4 after the node came back")
    stop_file.touch()
    code, left, state = run.after()
    assert code == 0, run.output()
    assert hvdd_steps(left) == [] and state == "JobState=RUNNING", run.output()
    result = read_result(tmp_path / "result.json")
    assert result["resets"] >= 2 and result["weight_error"] < 0.01


def test_killed_worker_is_reported_as_killed_and_the_job_recovers(salloc, tmp_path):
    run = salloc("-np", 4, "--min-np", 2, "--host-discovery", "slurm", "--discovery-interval",
                 0.5, "--blacklist-cooldown-range", 1, 2, "--verbose",
                 *train_args(tmp_path, epochs=6, delay_ms=25))
    workers = run.wait_for_size(4)
    run.wait_for_line(r"epoch 1/6", "the first epoch to end")
    os.kill(workers[3], signal.SIGKILL)
    # srun's 137 is told as the signal it stands for.
    run.wait_for_line(r"killed by signal 9", "the worker's death")
    code, left, state = run.after()
    assert code == 0, run.output()
    assert hvdd_steps(left) == [] and state == "JobState=RUNNING", run.output()
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 6 and result["resets"] >= 1


def test_a_killed_srun_leaves_no_step_behind(salloc, tmp_path):
    # Fixed size: the first failure ends the job. The daemon counts the worker
    # whose srun died as gone and never signals it again, so only the launcher's
    # clean-up (scancel of the orphaned step) can end that task.
    run = salloc("-np", 4, "--verbose", *train_args(tmp_path, epochs=1000, delay_ms=50))
    workers = run.wait_for_size(4)
    srun_pid = int(run.wait_for_line(r"started worker \d+ on node2 \(pid (\d+)\)").group(1))
    os.kill(srun_pid, signal.SIGKILL)
    code, left, state = run.after()
    assert code == 1, run.output()
    assert "killed by signal 9" in run.output(), run.output()
    assert hvdd_steps(left) == [] and state == "JobState=RUNNING", run.output()
    for worker in workers.values():
        wait_pid_gone(worker)


def test_cancel_ends_every_step_and_keeps_the_allocation(salloc, slurm, tmp_path):
    run = salloc("-np", 4, "--verbose", *train_args(tmp_path, epochs=1000, delay_ms=50))
    job = run.job_id()
    pid = run.horovodrun_pid()
    workers = run.wait_for_size(4)
    os.kill(pid, signal.SIGINT)  # Ctrl-C: horovodrun cancels the job
    code, left, state = run.after()
    assert code == 130, run.output()
    # No step and no worker left; the allocation itself still runs.
    assert hvdd_steps(left) == [], run.output()
    assert state == "JobState=RUNNING", run.output()
    for worker in workers.values():
        wait_pid_gone(worker)
    assert not [s for s in slurm.steps(job) if " hvdd." in s]


def horovodrun_alone(env, *args):
    return subprocess.run([str(HOROVODRUN), *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_missing_srun_is_one_clear_error(slurm, tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with Slurm's scontrol but no srun
    bin_dir.mkdir()
    os.symlink(shutil.which("scontrol"), bin_dir / "scontrol")
    env = slurm.env(SLURM_JOB_ID="1", SLURM_JOB_NODELIST="node1", SLURM_TASKS_PER_NODE="1",
                    PATH=str(bin_dir))
    result = horovodrun_alone(env, "-np", 1, "true")
    assert result.returncode == 1, result
    assert result.stderr.strip().splitlines() == [
        "horovodrun: error: --launcher slurm: srun is not in PATH (is Slurm's client, "
        "slurm-client, installed here?)"], result.stderr


def test_slurm_not_running_is_one_clear_error(slurm, tmp_path):
    # The same cluster's config, pointing at a controller port where nothing listens.
    with socket_on_free_port() as port:
        pass
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"SlurmctldPort=\d+", f"SlurmctldPort={port}", slurm.conf.read_text()))
    env = slurm.env(SLURM_CONF=str(conf), SLURM_JOB_ID="1", SLURM_JOB_NODELIST="node1",
                    SLURM_TASKS_PER_NODE="1")
    result = horovodrun_alone(env, "-np", 1, "true")
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("horovodrun: error: Slurm does not answer for job 1: "), lines
    # scontrol's own words, or, when it retries the dead controller past horovodrun's
    # deadline (a loaded machine), that deadline: either way one line naming Slurm.
    assert ("Unable to contact slurm controller" in lines[0]
            or "scontrol -o show job 1': timed out after" in lines[0]), lines


class socket_on_free_port:
    """A port nobody listens on once the block ends (bound, never listened)."""

    def __enter__(self):
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc):
        self.sock.close()


def test_a_hot_spare_srun_step_takes_a_killed_workers_place(salloc, tmp_path):
    # Ranks 0-1 on node1, rank 2 on node2 (--max-np 3); the spare is an srun step on node2's
    # other slot. Rank 0 is killed: node1 is blacklisted as in Horovod (rank 1 leaves too),
    # and the spare takes rank 1 beside rank 2's worker (now rank 0): one reset, size 2.
    run = salloc("-np", 3, "--min-np", 1, "--max-np", 3, "--hot-spares", 1, "--host-discovery",
                 "slurm", "--discovery-interval", 0.5, "--verbose",
                 *train_args(tmp_path, epochs=6, delay_ms=25))
    before = run.wait_for_size(3)
    spare = run.wait_for_line(r"started spare (\d+) on node2 \(pid (\d+)\)", "the spare")
    spare_id = int(spare.group(1))
    run.wait_for_line(rf"spare {spare_id} on node2 is ready", "the spare to wait")
    run.wait_for_line(r"epoch 1/6", "the first epoch to end")
    os.kill(before[0], signal.SIGKILL)
    run.wait_for_line(rf"horovodrun: spare {spare_id} on node2 took rank 1 ", "the swap")
    code, left, _state = run.after()
    assert code == 0, run.output()
    assert hvdd_steps(left) == [], run.output()
    after = run.workers()
    assert sorted(after) == [0, 1] and after[0] == before[2], run.output()
    assert after[1] not in before.values()
    assert run.count(r"reset took \d+ ms") == 1
    result = read_result(tmp_path / "result.json")
    assert result["samples_per_epoch"] == [SAMPLES] * 6
    assert result["final_size"] == 2 and result["resets"] == 1
