"""Horovod 0.28's horovodrun command line, as a Horovod user runs it: the tunables reach the
workers' environment under Horovod's names, the worker environment has what Horovod's
launcher sets at spawn, --output-filename writes Horovod's layout, -cb reports the build,
--mpi is refused, and Horovod's YAML config works with flags over it. (That the documented
flag table lists exactly the flags --help prints is test_docs.py's check.)

The workers here are a tiny Python script that prints its environment: no runtime, so each
job ends as soon as its workers have printed."""

import json
import re
import subprocess
import sys

from harness import BUILD, ELASTIC_TRAIN, HOROVODRUN, read_result

PRINT_ENV = """import json, os, sys
keys = {k: v for k, v in os.environ.items()
        if k.startswith(("HOROVOD_", "NCCL_")) or k == "PYTHONUNBUFFERED"}
print("ENV " + json.dumps(keys, sort_keys=True))
print("err from " + os.environ.get("HOROVOD_RANK", "?"), file=sys.stderr)
"""


def write_worker(tmp_path):
    path = tmp_path / "print_env.py"
    path.write_text(PRINT_ENV)
    return path


def worker_envs(run):
    """{rank: env} from the workers' "ENV {...}" lines, keyed by the [rank] prefix."""
    envs = {}
    for line in run.output().splitlines():
        m = re.match(r"^\[(\d+)\]<stdout>:ENV (\{.*\})$", line)
        if m:
            envs[int(m.group(1))] = json.loads(m.group(2))
    return envs


def run_ok(horovodrun, *args):
    run = horovodrun(*args)
    assert run.wait() == 0, run.output()
    return run


def test_each_tunable_reaches_the_workers_environment(horovodrun, tmp_path):
    worker = write_worker(tmp_path)
    run = run_ok(horovodrun,
                 "-np", 1,
                 "--fusion-threshold-mb", 32, "--cycle-time-ms", 2.5, "--cache-capacity", 512,
                 "--hierarchical-allreduce", "--no-hierarchical-allgather",
                 "--timeline-filename", tmp_path / "timeline.json", "--timeline-mark-cycles",
                 "--autotune", "--autotune-log-file", tmp_path / "autotune.csv",
                 "--autotune-warmup-samples", 2, "--autotune-steps-per-sample", 4,
                 "--autotune-bayes-opt-max-samples", 6, "--autotune-gaussian-process-noise", 0.5,
                 "--no-stall-check", "--stall-check-warning-time-seconds", 20,
                 "--stall-check-shutdown-time-seconds", 40, "--gloo-timeout-seconds", 90,
                 "--num-nccl-streams", 2, "--thread-affinity", 1, "--tcp",
                 "--log-level", "info", "--log-without-timestamp",
                 sys.executable, worker)
    env = worker_envs(run)[0]
    expected = {
        "HOROVOD_FUSION_THRESHOLD": str(32 * 1024 * 1024),
        "HOROVOD_CYCLE_TIME": "2.5",
        "HOROVOD_CACHE_CAPACITY": "512",
        "HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
        "HOROVOD_HIERARCHICAL_ALLGATHER": "0",
        "HOROVOD_TIMELINE": str(tmp_path / "timeline.json"),
        "HOROVOD_TIMELINE_MARK_CYCLES": "1",
        "HOROVOD_AUTOTUNE": "1",
        "HOROVOD_AUTOTUNE_LOG": str(tmp_path / "autotune.csv"),
        "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "2",
        "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "4",
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "6",
        "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.5",
        "HOROVOD_STALL_CHECK_DISABLE": "1",
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "20",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "40",
        "HOROVOD_GLOO_TIMEOUT_SECONDS": "90",
        "HOROVOD_NUM_NCCL_STREAMS": "2",
        "HOROVOD_THREAD_AFFINITY": "1",
        "NCCL_IB_DISABLE": "1",
        "HOROVOD_LOG_LEVEL": "INFO",
        "HOROVOD_LOG_HIDE_TIME": "1",
    }
    assert {k: env.get(k) for k in expected} == expected

    # One warning line each for what nothing acts on yet; none for the rest.
    warnings = [l for l in run.lines if l.startswith("horovodrun: warning: ")]
    for flag in ("--cache-capacity", "--autotune", "--num-nccl-streams", "--thread-affinity",
                 "--log-without-timestamp"):
        assert sum(1 for w in warnings if w.startswith(f"horovodrun: warning: {flag} ")) == 1, \
            run.output()
    assert len(warnings) == 5, run.output()


def test_a_training_job_runs_with_the_tunables_its_runtime_reads(horovodrun, tmp_path):
    # The worker runtime takes Horovod's values as horovodrun passes them: a fractional cycle
    # time, the fusion threshold in bytes, the Gloo timeout as its ring timeout.
    run = run_ok(horovodrun, "-np", 2, "-H", "localhost:2", "--cycle-time-ms", 2.5,
                 "--fusion-threshold-mb", 4, "--gloo-timeout-seconds", 60,
                 ELASTIC_TRAIN, "--epochs", 2, "--output", tmp_path / "result.json")
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 2 and result["final_size"] == 2, run.output()
    assert not [l for l in run.lines if l.startswith("horovodrun: warning: ")], run.output()


def test_mpi_only_flags_are_accepted_with_a_warning(horovodrun, tmp_path):
    worker = write_worker(tmp_path)
    run = run_ok(horovodrun, "-np", 1, "--gloo", "--disable-cache", "--mpi-threads-disable",
                 "--mpi-args=--map-by ppr:1:node", sys.executable, worker)
    warnings = [l for l in run.lines if l.startswith("horovodrun: warning: ")]
    assert len(warnings) == 2, run.output()
    assert all("no effect" in w and "MPI" in w for w in warnings)
    assert worker_envs(run)[0]["HOROVOD_MPI_THREADS_DISABLE"] == "1"


def test_worker_environment_at_two_hosts_of_two_slots(horovodrun, tmp_path):
    worker = write_worker(tmp_path)
    # Two host names that both launch on this machine.
    hosts = ["127.0.0.1", "localhost"]
    run = run_ok(horovodrun, "-np", 4, "-H", f"{hosts[0]}:2,{hosts[1]}:2",
                 "--network-interfaces", "lo", sys.executable, worker)
    envs = worker_envs(run)
    assert sorted(envs) == [0, 1, 2, 3], run.output()
    by_host = {}
    for rank, env in envs.items():
        assert env["HOROVOD_RANK"] == str(rank)
        assert env["HOROVOD_SIZE"] == "4"
        assert env["HOROVOD_LOCAL_SIZE"] == "2"
        assert env["HOROVOD_CROSS_SIZE"] == "2"
        assert env["HOROVOD_ELASTIC"] == "0"
        assert env["HOROVOD_GLOO_IFACE"] == "lo"
        assert env["NCCL_SOCKET_IFNAME"] == "lo"
        assert env["PYTHONUNBUFFERED"] == "1"
        by_host.setdefault(env["HOROVOD_HOSTNAME"], []).append(rank)
    assert sorted(by_host) == sorted(hosts)
    # Horovod's layout: ranks host by host; local rank within the host, cross rank = the
    # host's place among hosts.
    host_order = sorted(by_host, key=lambda h: min(by_host[h]))
    for cross_rank, host in enumerate(host_order):
        ranks = sorted(by_host[host])
        assert ranks == list(range(ranks[0], ranks[0] + 2)), by_host
        for local_rank, rank in enumerate(ranks):
            assert envs[rank]["HOROVOD_LOCAL_RANK"] == str(local_rank)
            assert envs[rank]["HOROVOD_CROSS_RANK"] == str(cross_rank)


def test_elastic_workers_get_horovod_elastic(horovodrun, tmp_path):
    worker = write_worker(tmp_path)
    run = run_ok(horovodrun, "-np", 2, "--min-np", 2, "-H", "127.0.0.1:1,localhost:1",
                 sys.executable, worker)
    envs = worker_envs(run)
    assert sorted(envs) == [0, 1], run.output()
    for env in envs.values():
        assert env["HOROVOD_ELASTIC"] == "1"
        assert env["HOROVOD_SIZE"] == "2"
        assert env["HOROVOD_LOCAL_SIZE"] == "1"
        assert "HOROVOD_GLOO_IFACE" not in env  # no interface chosen


def test_output_filename_writes_each_ranks_lines_in_horovods_layout(horovodrun, tmp_path):
    worker = write_worker(tmp_path)
    out = tmp_path / "logs"
    run = run_ok(horovodrun, "-np", 2, "--output-filename", out, sys.executable, worker)
    for rank in (0, 1):
        stdout = (out / f"rank.{rank}" / "stdout").read_text().splitlines()
        stderr = (out / f"rank.{rank}" / "stderr").read_text().splitlines()
        assert len(stdout) == 1 and stdout[0].startswith(f"[{rank}]<stdout>:ENV {{"), stdout
        assert stderr == [f"[{rank}]<stderr>:err from {rank}"]
    # The terminal still has them.
    assert run.count(r"^\[1\]<stderr>:err from 1$") == 1


def test_output_is_prefixed_with_a_timestamp_on_request(horovodrun, tmp_path):
    worker = write_worker(tmp_path)
    run = run_ok(horovodrun, "-np", 1, "-prefix-timestamp", sys.executable, worker)
    # Python's time.asctime(), then Horovod's prefix: "Wed Dec  2 02:14:17 2026[0]<stdout>:".
    stamp = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"
    assert run.count(stamp + r"\[0\]<stderr>:err from 0$") == 1, run.output()


def test_check_build_reports_what_is_built():
    env = {"PYTHONPATH": str(BUILD / "python")}
    probe = subprocess.run([sys.executable, "-c", "import horovodd.torch"], env=env,
                           capture_output=True)
    for flag in ("-cb", "--check-build"):
        done = subprocess.run([str(HOROVODRUN), flag], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        text = done.stdout
        for heading in ("Available Frameworks:", "Available Controllers:",
                        "Available Tensor Operations:"):
            assert heading in text
        torch_mark = "X" if probe.returncode == 0 else " "
        assert f"    [{torch_mark}] PyTorch" in text
        assert "    [ ] TensorFlow" in text
        assert re.search(r"Controllers:\n    \[ \] MPI\n    \[X\] Gloo\n", text), text
        assert re.search(r"Operations:\n    \[[X ]\] NCCL\n", text), text
        assert text.rstrip().endswith("[X] Gloo")


def test_version():
    for flag in ("-v", "--version"):
        done = subprocess.run([str(HOROVODRUN), flag], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0
        assert re.fullmatch(r"\d+\.\d+\.\d+\n", done.stdout), done.stdout


def test_mpi_and_jsrun_are_refused_naming_what_to_use(horovodrun, tmp_path):
    for flag in ("--mpi", "--jsrun"):
        run = horovodrun("-np", 2, flag, "true")
        assert run.wait() == 2
        err = run.output()
        assert err.startswith("horovodrun: error: "), err
        assert flag in err and "--gloo" in err and "Gloo" in err


def test_horovod_yaml_config_with_a_flag_over_it(horovodrun, tmp_path):
    worker = write_worker(tmp_path)
    config = tmp_path / "horovod.yaml"
    config.write_text("params:\n"
                      "  fusion_threshold_mb: 32\n"
                      "  cycle_time_ms: 5\n"
                      "  hierarchical_allreduce: true\n"
                      "stall_check:\n"
                      "  enabled: false\n"
                      "library_options:\n"
                      "  gloo_timeout_seconds: 77\n")
    run = run_ok(horovodrun, "-np", 1, "--config-file", config, "--cycle-time-ms", 7,
                 sys.executable, worker)
    env = worker_envs(run)[0]
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(32 * 1024 * 1024)
    assert env["HOROVOD_CYCLE_TIME"] == "7"  # the flag over the file
    assert env["HOROVOD_HIERARCHICAL_ALLREDUCE"] == "1"
    assert env["HOROVOD_STALL_CHECK_DISABLE"] == "1"
    assert env["HOROVOD_GLOO_TIMEOUT_SECONDS"] == "77"

    config.write_text("params:\n  fusion_treshold_mb: 32\n")
    run = horovodrun("-np", 1, "--config-file", config, sys.executable, worker)
    assert run.wait() == 2
    assert f"{config}:2: unknown key 'params.fusion_treshold_mb'" in run.output()
