"""horovodrun with several daemon addresses (--daemon a,b; issue 36): an
address nothing answers on is skipped, and horovodrun follows its job
through a SIGKILL and restart of its daemon, resuming the job's output after
the last line it printed (none twice), then exits with the job's outcome.

Real processes on loopback (harness.StandaloneDaemons, harness.Run); every
process is ended by PID."""

import re
import signal

from harness import (DISCOVER_HOSTS, ELASTIC_TRAIN, HostsFile, Run, daemons,  # noqa: F401
                     free_port, read_result)

SAMPLES = 1024
EPOCHS = 30


def test_horovodrun_follows_its_job_through_a_restart_of_its_daemon(daemons, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    daemon = daemons.start()
    dead = f"127.0.0.1:{free_port()}"
    run = Run(["--daemon", f"{dead},{daemon.address}", "--token-file", daemon.token_file,
               "-np", 2, "--min-np", 2, "--max-np", 2, "--host-discovery-script", DISCOVER_HOSTS,
               "--discovery-interval", 0.2, ELASTIC_TRAIN, "--epochs", EPOCHS, "--samples",
               SAMPLES, "--step-delay-ms", 15, "--output", tmp_path / "result.json"],
              cwd=tmp_path)
    try:
        run.wait_for_line(rf"^\[0\]<stdout>:epoch 2/{EPOCHS} ", "training to start")
        job_id = next(iter(daemon.jobs()))
        assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
        daemon = daemons.start()
        daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
        assert run.wait() == 0, run.output()[-4000:]
    finally:
        run.cleanup()
    epochs = [int(m.group(1)) for m in
              (re.match(rf"^\[0\]<stdout>:epoch (\d+)/{EPOCHS} ", l) for l in run.lines) if m]
    # Resumed after the last line shown: none twice, and the job's end reached.
    assert len(epochs) == len(set(epochs)), epochs
    assert epochs[-1] == EPOCHS, epochs
    result = read_result(tmp_path / "result.json")
    assert result["samples_per_epoch"] == [SAMPLES] * EPOCHS
