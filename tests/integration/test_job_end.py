"""How jobs end when they cannot go on: min np never reached, the reset limit,
and how a misbehaving discovery script is survived."""

from harness import DISCOVER_HOSTS, ELASTIC_TRAIN, HostsFile, read_result


def test_min_np_not_reachable_fails_naming_min_np(horovodrun, tmp_path):
    HostsFile(tmp_path, "localhost:1")
    run = horovodrun("--min-np", 2, "--max-np", 4, "--host-discovery-script", DISCOVER_HOSTS,
                     "--elastic-timeout", 5, ELASTIC_TRAIN, "--epochs", 1)
    assert run.wait() != 0
    last = run.lines[-1]
    assert "min-np 2" in last and "elastic-timeout" in last, run.output()


def test_workers_that_always_fail_end_the_job_at_once(horovodrun, tmp_path):
    # Every worker fails and its host is blacklisted: nothing is left to run on, so the job
    # fails with Horovod's message instead of retrying until --reset-limit or
    # --elastic-timeout (test_horovod_elastic.py has the reset limit).
    run = horovodrun("-np", 2, "--min-np", 1, "--max-np", 2, "-H", "localhost:2",
                     "--reset-limit", 2, "/bin/sh", "-c", "exit 7")
    assert run.wait() == 1
    last = run.lines[-1]
    assert "Horovod detected that one or more processes exited with non-zero status" in last, \
        run.output()
    assert "exited with status 7" in last


def test_fixed_size_job_fails_when_a_worker_fails(horovodrun, tmp_path):
    run = horovodrun("-np", 2, "-H", "localhost:2", "/bin/sh", "-c",
                     'if [ "$HOROVOD_RANK" = 1 ]; then exit 5; fi; sleep 60')
    assert run.wait() == 1
    assert "exited with status 5" in run.lines[-1], run.output()


DISCOVERY_SCRIPT = """#!/bin/sh
# Misbehaves on demand: the mode file says how.
mode=$(cat "$(dirname "$0")/mode")
case "$mode" in
  fail) echo "inventory service unreachable" >&2; exit 3 ;;
  hang) sleep 1000 ;;
  garbage) echo "this is not a host line!" ;;
  *) cat "$(dirname "$0")/hosts.txt" ;;
esac
"""


def test_discovery_failures_keep_the_last_good_hosts(horovodrun, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    script = tmp_path / "discover.sh"
    script.write_text(DISCOVERY_SCRIPT)
    script.chmod(0o755)
    mode = tmp_path / "mode"
    mode.write_text("ok")
    run = horovodrun("-np", 2, "--min-np", 2, "--max-np", 2, "--host-discovery-script", script,
                     "--discovery-interval", "0.1", "--discovery-timeout", 1, "--verbose",
                     ELASTIC_TRAIN, "--epochs", 3, "--step-delay-ms", 60,
                     "--output", tmp_path / "result.json")
    run.wait_for_size(2)
    for bad, message in (("fail", r"exited with status 3"), ("hang", r"timed out"),
                         ("garbage", r"not a host line")):
        mode.write_text(bad)
        run.wait_for_line(rf"host discovery failed.*{message}", f"the {bad} discovery to be reported")
        mode.write_text("ok")
        run.wait_for_line(r"host discovery works again")
        # Polled every 0.1 s, but each distinct failure is reported once.
        assert run.count(rf"host discovery failed.*{message}") == 1
    assert run.wait() == 0, run.output()
    result = read_result(tmp_path / "result.json")
    assert result["final_size"] == 2
    assert result["resets"] == 0
