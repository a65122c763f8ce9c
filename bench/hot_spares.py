#!/usr/bin/env python3
"""Hot spares (issue 35): what a SIGKILLed worker costs an 8-worker elastic PyTorch job with
and without `--hot-spares 1`.

Each case runs bench/hot_spares_worker.py under horovodrun (embedded daemon, every worker
forked here) on nine one-slot hosts 127.0.0.1-9 with -np 8 --max-np 8: without spares the
ninth slot is free, with one it holds the spare. Once the job trains at size 8 (and the spare
waits to join), the worker on 127.0.0.5 is SIGKILLed; its host is blacklisted as in Horovod.
Printed per case: the time from the kill to rank 0's first step at size 8 again, the resets,
and the steps trained at a smaller size; then the ratio without/with. The same again with a
worker whose start takes 10 s (a sleep before hvd.init(), as a CUDA worker's would).

    python3 bench/hot_spares.py            # BUILD_DIR (default build/) has horovodrun

Not a test: ctest and CI never run it. Every process it starts is ended by its id."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("BUILD_DIR", ROOT / "build"))
HOROVODRUN = BUILD / "bin" / "horovodrun"
WORKER = Path(__file__).resolve().parent / "hot_spares_worker.py"
HOSTS = ",".join(f"127.0.0.{i}:1" for i in range(1, 10))
VICTIM_HOST = "127.0.0.5"
STEP = re.compile(r"STEP t=(\S+) size=(\d+) resets=(\d+) step=(\d+)")
STARTED = re.compile(r"started worker \d+ on (\S+) \(pid (\d+)\)")
DEADLINE = 600


class Job:
    def __init__(self, spares, init_delay, steps):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BUILD / "python"),
                                                        env.get("PYTHONPATH")) if p)
        args = [str(HOROVODRUN), "--verbose", "--launcher", "local", "-np", "8", "--min-np", "1",
                "--max-np", "8", "-H", HOSTS, "--start-timeout", "300"]
        if spares:
            args += ["--hot-spares", str(spares)]
        args += [sys.executable, str(WORKER), "--steps", str(steps), "--init-delay",
                 str(init_delay)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, env=env,
                                     start_new_session=True)
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, predicate, what, timeout=DEADLINE):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate(self.lines)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    raise RuntimeError(f"no {what}:\n" + "\n".join(self.lines[-40:]))
                self.cond.wait(min(left, 1))

    def steps(self):
        with self.cond:
            return [(float(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)))
                    for m in (STEP.search(l) for l in self.lines) if m]

    def end(self):
        try:
            self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # horovodrun's own group, started here
            self.proc.wait()
        self.reader.join(30)


def run_case(spares, init_delay):
    job = Job(spares, init_delay, steps=300)
    try:
        job.wait_for(lambda _l: [s for s in job.steps() if s[1] == 8 and s[3] >= 40],
                     "40 steps at size 8")
        if spares:
            job.wait_for(lambda lines: any(re.search(r"spare \d+ on \S+ is ready", l)
                                           for l in lines), "a ready spare")
        victim = job.wait_for(
            lambda lines: next((int(m.group(2)) for m in (STARTED.search(l) for l in lines)
                                if m and m.group(1) == VICTIM_HOST), None),
            "the victim's pid")
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        back = job.wait_for(lambda _l: next((s for s in job.steps() if s[2] >= 1 and s[1] == 8),
                                            None), "a step at size 8 after the reset")
        job.end()
    finally:
        if job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)
            job.proc.wait()
    smaller = sum(1 for s in job.steps() if s[1] < 8)
    resets = sum(1 for l in job.lines if "reset took" in l)
    return {"seconds": back[0] - killed_at, "resets": resets, "smaller": smaller,
            "exit": job.proc.returncode}


def main():
    if not HOROVODRUN.exists():
        sys.exit(f"{HOROVODRUN} is missing: build first (scripts/build.sh)")
    print(f"{'case':<34} {'kill -> size 8 (s)':>18} {'resets':>7} {'steps < 8':>10} {'exit':>5}")
    for init_delay in (0, 10):
        results = {}
        for spares in (0, 1):
            r = run_case(spares, init_delay)
            results[spares] = r
            name = (f"{'--hot-spares 1' if spares else 'no spare'}"
                    f"{f', {init_delay:g} s start' if init_delay else ''}")
            print(f"{name:<34} {r['seconds']:>18.3f} {r['resets']:>7} {r['smaller']:>10} "
                  f"{r['exit']:>5}", flush=True)
        ratio = results[0]["seconds"] / max(results[1]["seconds"], 1e-9)
        print(f"{'ratio without/with':<34} {ratio:>18.1f}", flush=True)


if __name__ == "__main__":
    main()
