"""Limits and request validation against a real horovodd: each test sets a small
limit in the daemon's config file, goes past it (with limits_probe, a raw gRPC
client, or as a job's worker), checks the refusal's status code and that its
message names the limit's config key or the bad field, then checks the daemon
still runs other jobs."""

import subprocess
import time

from harness import BUILD, EVENT_DEADLINE

PROBE = BUILD / "tests" / "integration" / "limits_probe"
HOROVODCTL = BUILD / "bin" / "horovodctl"


def probe(*args):
    """Runs limits_probe; returns its report lines ("label: OK ..." or
    "label: CODE: message"). subprocess.run kills it if it overruns."""
    assert PROBE.exists(), f"build first: missing {PROBE}"
    result = subprocess.run([str(PROBE), *[str(a) for a in args]], capture_output=True,
                            text=True, timeout=EVENT_DEADLINE)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def start_daemon(horovodd, tmp_path, **limits):
    config = tmp_path / "limits.yaml"
    config.write_text("limits:\n" + "".join(f"  {k}: {v}\n" for k, v in limits.items()))
    return horovodd("--config", config)


def submit(daemon, *command, np=1, max_np=1, env_name="-", env_bytes=0):
    """SubmitJob through the probe: its one report line."""
    lines = probe("submit", daemon.address, daemon.token_file, np, max_np, env_name, env_bytes,
                  *command)
    assert len(lines) == 1, lines
    return lines[0]


def cancel(daemon, job_id):
    result = subprocess.run([str(HOROVODCTL), *daemon.client_args(), "cancel", "--wait", job_id],
                            capture_output=True, text=True, timeout=EVENT_DEADLINE)
    assert result.returncode == 0, result.stdout + result.stderr


def assert_still_serves(daemon, horovodrun):
    run = horovodrun(*daemon.client_args(), "-np", 1, "-H", "localhost:1",
                     "/bin/echo", "still-served")
    assert run.wait() == 0, run.output()
    assert "still-served" in run.output()


def test_oversized_values_and_too_many_keys_are_refused_to_a_worker(horovodd, horovodrun,
                                                                   tmp_path):
    daemon = start_daemon(horovodd, tmp_path, max_kv_value_bytes=1024, max_kv_keys_per_job=3)
    # The probe runs as the job's worker, with the identity and token the
    # daemon gave it: 4 keys of 1024 bytes, then one of 1025.
    run = horovodrun(*daemon.client_args(), "-np", 1, "-H", "localhost:1",
                     PROBE, "worker-kv", 1024, 4)
    assert run.wait() == 0, run.output()
    out = run.output()
    for i in range(3):
        assert f"KvSet key{i} 1024: OK" in out, out
    assert ("KvSet key3 1024: RESOURCE_EXHAUSTED: this job already holds 3 keys, the limit "
            "(limits.max_kv_keys_per_job)") in out, out
    assert ("KvSet big 1025: RESOURCE_EXHAUSTED: value of key 'big' is 1025 bytes; the limit "
            "is 1024 bytes (limits.max_kv_value_bytes)") in out, out
    assert_still_serves(daemon, horovodrun)


def test_one_job_too_many_is_refused(horovodd, horovodrun, tmp_path):
    daemon = start_daemon(horovodd, tmp_path, max_jobs=1)
    first = submit(daemon, "/bin/sleep", "300")
    assert first.startswith("SubmitJob: OK job-"), first
    job_id = first.split()[-1]
    refused = submit(daemon, "/bin/true")
    assert refused.startswith("SubmitJob: RESOURCE_EXHAUSTED: "), refused
    assert "(limits.max_jobs)" in refused, refused
    cancel(daemon, job_id)
    assert_still_serves(daemon, horovodrun)


def test_too_many_workers_is_refused(horovodd, horovodrun, tmp_path):
    daemon = start_daemon(horovodd, tmp_path, max_workers_per_job=2)
    refused = submit(daemon, "/bin/true", np=3, max_np=3)
    assert refused == ("SubmitJob: RESOURCE_EXHAUSTED: num_proc 3 is over this horovodd's limit "
                       "of 2 workers per job (limits.max_workers_per_job)"), refused
    # horovodrun shows the same refusal.
    run = horovodrun(*daemon.client_args(), "-np", 3, "-H", "localhost:3", "/bin/true")
    assert run.wait() == 1, run.output()
    assert "(limits.max_workers_per_job)" in run.output()
    assert_still_serves(daemon, horovodrun)


def test_too_large_messages_and_job_specs_are_refused(horovodd, horovodrun, tmp_path):
    daemon = start_daemon(horovodd, tmp_path, max_message_bytes=1048576,
                          max_kv_value_bytes=65536, max_job_spec_bytes=65536)
    # Over max_message_bytes: gRPC refuses it before the daemon reads it.
    huge = submit(daemon, "/bin/true", env_name="BIG", env_bytes=2 * 1048576)
    assert huge.startswith("SubmitJob: RESOURCE_EXHAUSTED: "), huge
    assert "larger than max" in huge, huge
    # Under it, but a job spec over max_job_spec_bytes.
    big = submit(daemon, "/bin/true", env_name="BIG", env_bytes=100 * 1024)
    assert big.startswith("SubmitJob: RESOURCE_EXHAUSTED: the job spec is "), big
    assert "(limits.max_job_spec_bytes)" in big, big
    assert_still_serves(daemon, horovodrun)


def test_too_many_watch_streams_from_one_client_are_refused(horovodd, horovodrun, tmp_path):
    daemon = start_daemon(horovodd, tmp_path, max_watch_streams_per_client=2)
    submitted = submit(daemon, "/bin/sleep", "300")
    assert submitted.startswith("SubmitJob: OK job-"), submitted
    job_id = submitted.split()[-1]
    lines = probe("watch", daemon.address, daemon.token_file, job_id, 3)
    assert lines[:2] == ["watch 1: OK open", "watch 2: OK open"], lines
    assert lines[2].startswith("watch 3: RESOURCE_EXHAUSTED: client ipv4:127.0.0.1 already holds "
                               "2 WatchJob streams open, the limit "
                               "(limits.max_watch_streams_per_client)"), lines
    # The probe's streams are gone with it; the daemon notices within its watch
    # poll, then two may open again.
    deadline = time.monotonic() + EVENT_DEADLINE
    while True:
        again = probe("watch", daemon.address, daemon.token_file, job_id, 2)
        if again == ["watch 1: OK open", "watch 2: OK open"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert again == ["watch 1: OK open", "watch 2: OK open"], again
    # `cancel --wait` watches too: it may find the last probe's streams not
    # released yet (the same poll as above), so it is retried until they are.
    deadline = time.monotonic() + EVENT_DEADLINE
    while True:
        result = subprocess.run([str(HOROVODCTL), *daemon.client_args(), "cancel", "--wait",
                                 job_id], capture_output=True, text=True, timeout=EVENT_DEADLINE)
        if "WatchJob streams open" not in result.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_still_serves(daemon, horovodrun)


def test_bad_and_reserved_environment_names_are_refused_naming_them(horovodd, horovodrun,
                                                                    tmp_path):
    daemon = start_daemon(horovodd, tmp_path)
    bad = submit(daemon, "/bin/true", env_name="BAD-NAME", env_bytes=1)
    assert bad == ("SubmitJob: INVALID_ARGUMENT: invalid job spec: env: environment variable "
                   "name 'BAD-NAME' is not valid (letters, digits and '_', not starting with a "
                   "digit)"), bad
    forged = submit(daemon, "/bin/true", env_name="HOROVODD_WORKER_TOKEN", env_bytes=8)
    assert forged.startswith("SubmitJob: INVALID_ARGUMENT: invalid job spec: env: "
                             "HOROVODD_WORKER_TOKEN is reserved"), forged
    empty = submit(daemon, "")
    assert empty == "SubmitJob: INVALID_ARGUMENT: invalid job spec: argv is empty: nothing to run"
    assert_still_serves(daemon, horovodrun)
