"""Leader and standby over etcd, and the takeover (issue 36).

Two horovodd share a real three-member etcd on loopback (ha_cluster.py), each
on its own state dir and address as if on its own machine: "a" leads, "b"
stands by, serving reads (forwarded to the leader) and refusing writes with
the leader's address. A job's workers run on two SSH hosts (the private sshd
on 127.0.0.2 and 127.0.0.3) under shims the leader started there. When
everything of a's machine is killed by PID, b's campaign wins once a's lease
expires, and b takes the job back as a restarted daemon does: the shims
reattached over SSH, the workers' tunnels reopened on the ports they know.

A lost link is played by SIGSTOP here (the daemons share this machine's
loopback): a frozen leader keeps its etcd lease no longer than one that lost
its network, and on SIGCONT finds it gone and steps down (exit 75).

Every etcd member, daemon, shim and worker is ended by PID at the end."""

import os
import signal
import subprocess
import time

import pytest

from ha_cluster import HaPair
from harness import HostsFile, _pid_alive, read_result, running_pids, wait_for
from remote_shims import remote_shim_root, remove_remote_shims
from restart_checks import assert_finished_without_reset
from test_daemon_restart import SAMPLES
from test_daemon_restart_ssh import HOSTS, hosts_of, submit_over_ssh

TTL = 3
DEPOSED = 75


@pytest.fixture
def ha(tmp_path, sshd):
    pair = HaPair(tmp_path, lease_ttl=TTL, env={"HOSTS_FILE": str(tmp_path / "hosts.txt")})
    yield pair
    roots = {remote_shim_root(d.output()) for d in pair.started if "shims there" in d.output()}
    pair.cleanup()
    for root in roots:
        remove_remote_shims(root)
    sshd.kill_sessions()


def leader_and_standby(ha):
    a = ha.start("a")
    a.wait_to_lead("a to lead")
    b = ha.start("b")
    b.wait_for_output(f"standby: {a.address} leads", "b to stand by")
    return a, b


def test_status_on_the_standby_and_writes_followed_to_the_leader(ha, sshd, tmp_path):
    # The standby's refusal itself (FAILED_PRECONDITION, its message, the leader's address in
    # the trailing metadata) is test_standby_job_service's; horovodctl follows it.
    HostsFile(tmp_path, "\n".join(f"{host}:1" for host in HOSTS))
    a, b = leader_and_standby(ha)
    job_id = submit_over_ssh(a, sshd, tmp_path, epochs=25, delay_ms=15)
    a.training(job_id, 2)

    # Reads on the standby: the leader's answer.
    assert b.status(job_id)["job_id"] == job_id
    assert job_id in b.jobs()
    # A write sent to the standby is refused there and done by the leader it names.
    cancel = b.ctl("cancel", job_id)
    assert cancel.returncode == 0, cancel.stderr
    assert a.ended(job_id)["state"] == "CANCELLED"
    assert b.status(job_id)["state"] == "CANCELLED"

    ha.kill_host(a)
    b.wait_to_lead("b to lead")
    # The same daemon answers as the leader now, from the records in etcd.
    assert b.status(job_id)["state"] == "CANCELLED"


def test_the_standby_takes_a_running_job_over_when_the_leaders_machine_is_lost(
        ha, sshd, tmp_path):
    HostsFile(tmp_path, "\n".join(f"{host}:1" for host in HOSTS))
    a, b = leader_and_standby(ha)
    epochs = 40
    job_id = submit_over_ssh(a, sshd, tmp_path, epochs=epochs, delay_ms=15)
    before = a.training(job_id, 2)
    pids = running_pids(before)
    generation = before["generation"]
    assert hosts_of(before) == HOSTS, before

    ha.kill_host(a)
    killed = time.monotonic()
    b.wait_for_output(f"job {job_id} taken back", "b to take the job back")
    took = time.monotonic() - killed
    print(f"\ntakeover: {took:.2f} s from the leader's SIGKILL to the standby holding the job "
          f"(lease TTL {TTL} s)")
    assert took < TTL + 30, b.output()
    assert all(_pid_alive(pid) for pid in pids), "a worker died in the takeover"
    after = b.status(job_id)
    assert after["state"] == "RUNNING", after
    assert running_pids(after) == pids
    assert after["generation"] == generation
    wait_for(lambda: b.status(job_id).get("last_commit", 0) > after.get("last_commit", 0),
             "commits to reach the new leader")
    assert_finished_without_reset(b, job_id, tmp_path / "result.json", epochs, generation, pids)


def test_a_worker_lost_while_no_daemon_leads_is_reset_after_the_takeover(ha, sshd, tmp_path):
    hosts = HostsFile(tmp_path, "\n".join(f"{host}:1" for host in HOSTS))
    a, b = leader_and_standby(ha)
    epochs = 30
    job_id = submit_over_ssh(a, sshd, tmp_path, epochs=epochs, delay_ms=15, min_np=1)
    status = a.training(job_id, 2)
    lost = next(w["pid"] for w in status["workers"] if w["host"] == HOSTS[1])

    ha.kill_host(a)
    os.kill(lost, signal.SIGKILL)  # while no daemon leads
    hosts.write(f"{HOSTS[0]}:1")
    b.wait_for_output(f"job {job_id} taken back", "b to take the job back")
    final = b.ended(job_id)
    assert final["state"] == "SUCCEEDED", (final, b.output())
    assert final.get("resets", 0) >= 1, final
    result = read_result(tmp_path / "result.json")
    assert result["samples_per_epoch"] == [SAMPLES] * epochs
    assert result["final_size"] == 1


def test_a_deposed_leader_that_comes_back_steps_down(ha, tmp_path):
    a, b = leader_and_standby(ha)
    os.kill(a.proc.pid, signal.SIGSTOP)  # its link lost: no renewal reaches etcd
    b.wait_to_lead("b to lead once a's lease expired", timeout=TTL + 60)
    os.kill(a.proc.pid, signal.SIGCONT)  # its link back
    try:
        code = a.proc.wait(60)
    except subprocess.TimeoutExpired:
        raise AssertionError("the deposed leader did not step down:\n" + a.output())
    assert code == DEPOSED, a.output()
    assert "stepping down" in a.output(), a.output()
    # The leader is b, and it is not disturbed.
    assert b.proc.poll() is None, b.output()
    assert b.jobs() == {} or all(j["state"] for j in b.jobs().values())
