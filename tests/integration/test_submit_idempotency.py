"""Idempotent SubmitJob (issue 36): a submission sent again with its client
request id, as horovodrun does when it retries on another daemon after losing
the answer, answers the job the first one made instead of making a second
one, and the daemon remembers the id through a SIGKILL and restart (the SQLite
journal) and through a takeover by a standby (the etcd journal).

submit_probe (a raw gRPC client) sends SubmitJob with an id of the test's
choosing to one daemon; horovodrun makes its own at random. Real processes on
loopback; every daemon, shim, worker and etcd member is ended by PID."""

import re
import secrets
import subprocess
import time

from ha_cluster import HaPair
from harness import BUILD, CLI_DEADLINE, EVENT_DEADLINE, daemons  # noqa: F401

PROBE = BUILD / "tests" / "integration" / "submit_probe"


def probe(daemon, request_id, *command):
    """Runs submit_probe against `daemon`; its report lines."""
    assert PROBE.exists(), f"build first: missing {PROBE}"
    result = subprocess.run([str(PROBE), daemon.address, str(daemon.token_file), request_id,
                             *map(str, command)],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=CLI_DEADLINE)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def submitted(daemon, request_id, *command, while_unavailable=False):
    """The job id the daemon answered a submission with. With
    `while_unavailable`, sent again while the daemon refuses connections: a
    standby that just took the lead swaps its standby server for the leader's
    on the same port, and a client retries the same request id meanwhile
    (which is what the id is for)."""
    deadline = time.monotonic() + EVENT_DEADLINE
    lines = probe(daemon, request_id, *command)
    while (while_unavailable and lines[0].startswith("SubmitJob: UNAVAILABLE")
           and time.monotonic() < deadline):
        time.sleep(0.1)
        lines = probe(daemon, request_id, *command)
    match = re.fullmatch(r"SubmitJob: OK (\S+)", lines[0])
    assert match, f"{lines}\n{daemon.output()}"
    return match.group(1)


def test_a_repeated_submission_is_one_job_through_a_restart_of_its_daemon(daemons, tmp_path):
    daemon = daemons.start()
    request_id = secrets.token_hex(16)
    job_id = submitted(daemon, request_id, "/bin/sleep", 600)
    assert submitted(daemon, request_id, "/bin/sleep", 600) == job_id
    assert list(daemon.jobs()) == [job_id]
    assert daemon.status(job_id)["client_request_id"] == request_id

    # Malformed ids are refused, naming the field, and make no job.
    for bad in ("short", "has spaces in it 0123456789", "x" * 129):
        lines = probe(daemon, bad, "/bin/true")
        assert lines[0].startswith("SubmitJob: INVALID_ARGUMENT: client_request_id "), lines
    # The same id for another command is not that job.
    lines = probe(daemon, request_id, "/bin/sleep", 601)
    assert lines[0].startswith("SubmitJob: ALREADY_EXISTS: "), lines
    assert job_id in lines[0]

    # A crash of the daemon loses nothing: the next one takes the job back with its id.
    daemon = daemons.restart(daemon)
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    assert submitted(daemon, request_id, "/bin/sleep", 600) == job_id
    assert list(daemon.jobs()) == [job_id]
    assert daemon.ctl("cancel", job_id).returncode == 0
    assert daemon.ended(job_id)["state"] == "CANCELLED"

    # Once it ended, and across a restart on the journal alone.
    daemon = daemons.restart(daemon)
    assert submitted(daemon, request_id, "/bin/sleep", 600) == job_id
    assert list(daemon.jobs()) == [job_id]


def test_horovodrun_sends_a_random_request_id_with_its_submission(daemons, tmp_path):
    daemon = daemons.start()
    jobs = [daemon.submit_detached("-np", 1, "-H", "localhost:1", "/bin/true", cwd=tmp_path)
            for _ in range(2)]
    ids = [daemon.status(job_id)["client_request_id"] for job_id in jobs]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids), ids
    assert ids[0] != ids[1]


def test_a_new_leader_knows_the_request_ids_of_the_jobs_it_took_over(tmp_path):
    ha = HaPair(tmp_path, lease_ttl=3)
    try:
        a = ha.start("a")
        a.wait_to_lead("a to lead")
        b = ha.start("b")
        b.wait_for_output(f"standby: {a.address} leads", "b to stand by")
        request_id = secrets.token_hex(16)
        job_id = submitted(a, request_id, "/bin/true")
        assert a.ended(job_id)["state"] == "SUCCEEDED"
        # The standby refuses the submission, naming the leader; it makes no job.
        refused = probe(b, request_id, "/bin/true")
        assert refused[0].startswith("SubmitJob: FAILED_PRECONDITION: this horovodd ("), refused
        assert refused[1:] == [f"leader: {a.address}"], refused

        ha.kill_host(a)
        b.wait_to_lead("b to lead")
        # The leader's records are etcd's: the id came over with the job.
        assert submitted(b, request_id, "/bin/true", while_unavailable=True) == job_id
        assert list(b.jobs()) == [job_id]
        assert b.status(job_id)["client_request_id"] == request_id
        assert submitted(b, secrets.token_hex(16), "/bin/true") != job_id
    finally:
        ha.cleanup()
