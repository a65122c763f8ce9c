"""The elastic parts of the benchmark: the reset against job size (with the machine's floor
beside it and the plot), the scale-up of a running job, and torchrun's restart as the peer.
bench.py's Bench runs them with the other parts; bench/README.md says what each measures."""
import os
import re
import statistics
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from bench_procs import (check_output, end_process, log, measure_kill, measure_reset,
                         raise_process_limits, read_steps, wait_steady, worker_logs)
from bench_report import ROUNDS, table, targets
from reset_plot import write_reset_plot

HERE = os.path.dirname(os.path.abspath(__file__))
# The slow joiner of the second scale-up case: about an interpreter importing torch.
SLOW_START_MS = 2000
# Horovod's Gloo rebuild after a reset, as its users measured it (horovod
# issue 3556), by number of ranks.
HOROVOD_RESET_S = {2: 0.4, 4: 1.2, 8: 7.1, 16: 15.8}
# The reset part's job sizes (RESET_SIZES=2,4,8,16 still runs those).
RESET_SIZES = [16, 32, 64, 128, 256]
# Fixed points the reset curve is read against: published figures for far
# larger jobs, as issue 37 cites them (no run of ours).
PUBLISHED_RESET = [
    ("NCCL comm shrink, 32-1,024 GPUs", "1.4-2.0 s",
     "NVIDIA's figure for NCCL's communicator shrink"),
    ("NVIDIA in-process restart", "~2.5 s fixed",
     "NVIDIA Resiliency Extension's in-process restart; 0.5 s barrier at 16,384 ranks"),
    ("torch TCPStore, 96,000 ranks", "~100 s",
     "PyTorch's TCPStore (libuv backend) bringing up 96,000 ranks"),
]
# The same published figures as points of the reset plot (bench/reset_plot.py):
# (label with its source, color, marker, [(workers, seconds)]); torchrun's is
# this bench's own torchrun part on this machine (issue 37 quotes 4.4 s).
PUBLISHED_RESET_POINTS = [
    ("NCCL ncclCommShrink, 32-1,024 GPUs, 1.4-2.0 s (NVIDIA's figure, as issue 37 cites it)",
     "#2a9d2a",
     "triangle", [(32, 1.4), (1024, 2.0)]),
    ("NVIDIA in-process restart, ~2.5 s at 16,384 ranks (nvidia-resiliency-ext)", "#7b3fbf",
     "diamond", [(16384, 2.5)]),
    ("torchrun --max_restarts, 4 workers, 4.4 s (bench/run.sh torchrun, torch 1.13)", "#c0392b",
     "square", [(4, 4.4)]),
    ("torch TCPStore bring-up (not a reset), ~100 s at 96,000 ranks (PyTorch)", "#888888",
     "circle", [(96000, 100.0)]),
]
TORCHRUN = "/usr/bin/torchrun"

# What a survivor touched across a reset, its own memory and its share of the host's segment
# (BENCH_TOUCHED, 2026-12-06: 530-590 + 90-120 KiB at every size from 16 to 256 workers): the
# floor's work per process when no BENCH_FLOOR_KIB is given and this run did not measure it.
SURVIVOR_FOOTPRINT_KIB = 640


def floor_comparison(reset_points, floor_points):
    """Each doubling of the reset beside the floor's: its time and its CPU per survivor against
    the floor's time and CPU per process, as ratios (under 1: the reset grew less than work
    that does not grow at all, at the same footprint, did on this machine)."""
    floor = {n: (cpu, wall) for n, cpu, wall in floor_points}
    steps, faster = [], []
    for (n0, t0, c0), (n1, t1, c1) in zip(reset_points, reset_points[1:]):
        if n0 not in floor or n1 not in floor:
            continue
        time_ratio = (t1 / t0) / (floor[n1][1] / floor[n0][1])
        cpu_ratio = (c1 / c0) / (floor[n1][0] / floor[n0][0])
        steps.append(f"{n0}->{n1}: time {t1 / t0:.2f}x / floor {floor[n1][1] / floor[n0][1]:.2f}x"
                     f" = {time_ratio:.2f}, CPU per survivor {c1 / c0:.2f}x / floor's per process"
                     f" {floor[n1][0] / floor[n0][0]:.2f}x = {cpu_ratio:.2f}")
        if time_ratio > 1.1:
            faster.append(f"{n0}->{n1}")
    verdict = (f"grows faster than the floor (by more than 10%) at {', '.join(faster)}"
               if faster else "grows no faster than the floor at any step (within 10%)")
    return "; ".join(steps) + f"; the reset {verdict}"


def reset_growth(points):
    """How the reset grows from each size to the next: the factor on kill -> resumed and on
    the reset's CPU against the factor on the job, and how much of the elapsed time the CPU
    would fill on this machine's cores (near 1: the reset is the machine's CPU, spent)."""
    cores = len(os.sched_getaffinity(0))
    steps = []
    for (n0, t0, c0), (n1, t1, c1) in zip(points, points[1:]):
        steps.append(f"{n0}->{n1} ({n1 / n0:.0f}x the workers): time {t1 / t0:.2f}x, "
                     f"CPU {c1 / c0:.2f}x")
    busy = ", ".join(f"{n}: {c / cores / t:.2f}" for n, t, c in points)
    return ("; ".join(steps) + f"; the reset's CPU / ({cores} cores x kill->resumed) "
            f"{busy}")


class ElasticParts:
    """The reset, scale-up and torchrun parts over one build directory (bench.py's Bench adds
    the others)."""

    def __init__(self, build_dir):
        self.build = build_dir
        self.horovodrun = os.path.join(build_dir, "bin/horovodrun")
        self.bin = lambda name: os.path.join(build_dir, "bench", name)

    def start_elastic(self, workdir, slots, max_np, interval, env=None, extra=()):
        hosts = os.path.join(workdir, "hosts")
        with open(hosts, "w") as f:
            f.write(f"localhost:{slots}\n")
        script = os.path.join(workdir, "discover.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\nexec cat {hosts}\n")
        os.chmod(script, 0o755)
        logs = os.path.join(workdir, "logs")
        os.mkdir(logs)
        argv = [self.horovodrun, "-np", str(slots), "--min-np", "1", "--max-np", str(max_np),
                "--host-discovery-script", script, "--discovery-interval", str(interval),
                # A killed worker's host sits out longer than the measurement.
                "--blacklist-cooldown-range", "120", "120", *extra,
                self.bin("bench_hvdd_worker"), "elastic", logs]
        out = open(os.path.join(workdir, "horovodrun.out"), "w")
        # The job a little below the driver: hundreds of busy workers on two
        # cores would otherwise starve the reading of their logs.
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env,
                                preexec_fn=lambda: os.nice(5))
        return proc, logs, hosts

    def stop_elastic(self, proc, logs, workdir):
        open(os.path.join(logs, "stop"), "w").close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            log("the elastic job did not stop by itself; ending it")
        end_process(proc)

    def reset(self):
        sizes = [int(n) for n in
                 os.environ.get("RESET_SIZES", ",".join(map(str, RESET_SIZES))).split(",")]
        raise_process_limits()
        curve = []
        growth = []  # (workers, kill->resumed s, the reset's CPU s: survivors' + daemon's)
        per_survivor = []  # (workers, kill->resumed s, CPU s per survivor)
        footprint = None  # KiB a survivor touched at the largest size (BENCH_TOUCHED)
        for n in sizes:
            rounds = [self.reset_round(n, r) for r in range(ROUNDS)]
            med = lambda key: statistics.median(r[key] for r in rounds if r[key] is not None)
            have = lambda key: any(r[key] is not None for r in rounds)
            seconds = med("total")
            split = []
            if have("detect"):
                split.append(f"kill->detected {med('detect') * 1e3:.0f} ms")
            if have("daemon"):
                split.append(f"daemon detected->ready {med('daemon') * 1e3:.0f} ms")
            if have("workers"):
                split.append(f"workers ready->resumed {med('workers') * 1e3:.0f} ms")
            if have("began"):
                split.append(f"last survivor began its rejoin {med('began') * 1e3:.0f} ms "
                             "after detected")
            if have("asked"):
                split.append(f"last survivor asked for the new generation "
                             f"{med('asked') * 1e3:.0f} ms after detected")
            if have("cpu_workers") and have("cpu_daemon"):
                split.append(f"CPU kill->resumed: survivors {med('cpu_workers'):.2f} s "
                             f"({med('cpu_workers') / (n - 1) * 1e3:.1f} ms each), "
                             f"daemon {med('cpu_daemon'):.2f} s")
            if have("switches"):
                switches = [r["switches"] for r in rounds if r["switches"] is not None]
                voluntary, involuntary, main = (statistics.median(s[i] for s in switches)
                                                for i in range(3))
                split.append(f"context switches per survivor {voluntary:.0f} voluntary "
                             f"({main:.0f} of them its main thread's), "
                             f"{involuntary:.0f} involuntary (medians)")
            if have("faults"):
                split.append(f"page faults per survivor {med('faults'):.0f} (median)")
            if have("touched_kib"):
                touched = [r["touched_kib"] for r in rounds if r["touched_kib"] is not None]
                own, shm = (statistics.median(t[k] for t in touched) for k in ("own", "shm"))
                footprint = own + shm
                split.append(f"memory touched per survivor {own:.0f} KiB of its own and "
                             f"{shm:.0f} KiB of the shared segment (medians; BENCH_TOUCHED)")
            phase_names = [p for p in ("answered", "ring", "communicator", "synced", "stepped")
                           if all(p in r["phases"] for r in rounds)]
            if phase_names:
                split.append("ready->last " + ", ".join(
                    f"{p} {statistics.median(r['phases'][p] for r in rounds) * 1e3:.0f}"
                    for p in phase_names) + " ms")
            work = [w for r in rounds for w in r["work"]]
            if work:
                pairs = statistics.median(w["pairs"] for w in work)
                keys = statistics.median(w["keys"] for w in work)
                kbytes = statistics.median(w["key_bytes"] for w in work)
                split.append(f"per rank: {pairs:.0f} pairs connected, {keys:.0f} keys "
                             f"({kbytes / 1024:.1f} KiB) read")
            each = " / ".join(f"{r['total'] * 1e3:.0f}" for r in rounds)
            log(f"reset, {n} workers: kill->resumed {seconds * 1e3:.0f} ms (median of "
                f"{len(rounds)}: {each} ms); " + "; ".join(split))
            peer = HOROVOD_RESET_S.get(n)
            table.append(("reset", f"{n:3d} workers kill->resumed", f"{seconds * 1e3:9.0f} ms",
                          f"{peer * 1e3:9.0f} ms" if peer else "", f"{peer / seconds:5.1f}"
                          if peer else "", f"median of {len(rounds)}; " + "; ".join(split)
                          + ("; peer: Horovod (horovod issue 3556)" if peer else "")))
            curve.append((n, seconds))
            if have("cpu_workers") and have("cpu_daemon"):
                growth.append((n, seconds, med("cpu_workers") + med("cpu_daemon")))
                per_survivor.append((n, seconds, med("cpu_workers") / (n - 1)))
            if n == 16:
                targets.append((seconds < 0.25, f"reset at 16 workers: {seconds * 1e3:.0f} ms "
                                                "kill -> resumed (target < 250 ms)"))
            if n == 256:
                targets.append((seconds < 1.0, f"reset at 256 workers: {seconds * 1e3:.0f} ms "
                                               "kill -> resumed (target < 1 s)"))
        if len(growth) > 1:
            line = reset_growth(growth)
            log(f"reset growth: {line}")
            table.append(("reset", "growth with the job", "", "", "", line))
            kib = int(os.environ.get("BENCH_FLOOR_KIB", "0")) or round(
                footprint or SURVIVOR_FOOTPRINT_KIB)
            floor = self.wake_floor(sizes, kib)
            if floor and len(per_survivor) > 1:
                line = floor_comparison(per_survivor, floor)
                log(f"reset against the floor: {line}")
                table.append(("reset", "growth against the floor", "", "", "", line))
        for what, figure, source in PUBLISHED_RESET:
            table.append(("reset", what, "", figure, "", source))
        self.plot_reset_curve(curve)
        self.scale_up()

    def wake_floor(self, sizes, kib):
        """The machine's own growth, for reading the reset's: bench_wake_floor (no horovodd
        in it) runs n processes of identical work per round (touch `kib` KiB, a survivor's
        footprint unless BENCH_FLOOR_KIB says otherwise, then a futex barrier), 50 rounds, at
        the reset's sizes; medians of the rounds. Work that does not grow per process still
        costs each process more CPU among more processes, and more so once all of theirs
        outgrows the caches. Returns [(n, CPU s per process per round, wall s)], or None."""
        runs = []
        for _ in range(ROUNDS):
            out = subprocess.run([self.bin("bench_wake_floor"), "50", str(kib), *map(str, sizes)],
                                 capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                log(f"bench_wake_floor failed ({out.returncode}): {out.stderr.strip()}")
                return None
            runs.append({int(n): (float(c), float(w)) for n, c, w in re.findall(
                r"FLOOR n=(\d+) .*cpu_us_per_round=([\d.]+) wall_ms=([\d.]+)", out.stdout)})
        points = []
        for n in sizes:
            cpu = statistics.median(r[n][0] for r in runs)
            wall = statistics.median(r[n][1] for r in runs)
            points.append((n, cpu, wall))
        per = ", ".join(f"{n}: {c:.1f} us" for n, c, _ in points)
        steps = "; ".join(f"{n0}->{n1}: time {w1 / w0:.2f}x" for (n0, _, w0), (n1, _, w1)
                          in zip(points, points[1:]))
        line = (f"the same work per process ({kib} KiB touched, then a futex barrier; "
                f"bench_wake_floor, median of {len(runs)}): CPU per process per round {per}; "
                f"{steps}")
        log(f"machine floor: {line}")
        table.append(("reset", "the machine's floor", "", "", "", line))
        return [(n, cpu * 1e-6, wall * 1e-3) for n, cpu, wall in points]

    def plot_reset_curve(self, curve):
        """docs/img/reset_curve.svg: this run's medians beside the published points."""
        path = os.path.join(os.path.dirname(HERE), "docs", "img", "reset_curve.svg")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        series = [("horovodd, this machine (2 cores, one host; bench/run.sh reset, medians)",
                   "#1f5fbf", "circle", sorted(curve), True),
                  ("Horovod elastic, Gloo rebuild (horovod issue 3556)", "#d9822b", "square",
                   sorted(HOROVOD_RESET_S.items()), True)]
        series += [(label, color, shape, points, True)
                   for label, color, shape, points in PUBLISHED_RESET_POINTS]
        write_reset_plot(path, series, "Reset: SIGKILL of one worker to every survivor "
                                       "past its first collective")
        log(f"reset curve plotted to {path}")

    def reset_round(self, n, round_index):
        """One kill of the highest rank of an n-worker job; the times of its
        parts (seconds, None where unknown) and the survivors' ring work."""
        log(f"reset, {n} workers, round {round_index + 1} of {ROUNDS}")
        with tempfile.TemporaryDirectory(prefix="hvdd-bench-reset-") as workdir:
            # Hundreds of workers on two cores miss heartbeats for seconds
            # while they start; the kill is seen from the exit, not from
            # the heartbeats, so a longer liveness timeout changes nothing
            # measured here.
            proc, logs, _ = self.start_elastic(workdir, n, n, 1,
                                               extra=("--liveness-timeout", "60"))
            record = None
            try:
                m = measure_reset(proc, logs, n, startup_timeout=60 + 2 * n)
                record = self.reset_record(workdir, m["t_kill"])
            finally:
                self.stop_elastic(proc, logs, workdir)
                check_output(workdir, proc)
            with open(os.path.join(workdir, "horovodrun.out")) as f:
                took = re.findall(r"reset took (\d+) ms", f.read())
        out = {"total": m["t_resumed"] - m["t_kill"], "work": m["work"],
               "detect": None, "daemon": None, "workers": None, "phases": {}, "began": None,
               "asked": None,
               "cpu_workers": m["cpu"]["workers"], "cpu_daemon": m["cpu"]["daemon"],
               "switches": m["cpu"].get("switches"), "faults": m["cpu"].get("faults"),
               "touched_kib": m["cpu"].get("touched_kib")}
        if record is not None:
            detected, ready = record
            out["detect"] = detected - m["t_kill"]
            out["daemon"] = ready - detected
            out["workers"] = m["t_resumed"] - ready
            # The workers' part by phase: from the generation ready to when
            # the last survivor passed each phase of its rejoin, and stepped.
            phases = m.get("phases") or {}
            marks = [(p, phases[p]) for p in ("answered", "ring", "communicator", "synced")
                     if phases.get(p)]
            marks.append(("stepped", m["t_resumed"]))
            out["phases"] = {p: t - ready for p, t in marks}
            for mark in ("began", "asked"):
                if phases.get(mark):
                    out[mark] = phases[mark] - detected
            if os.environ.get("BENCH_PERF_OUT"):
                # The profile's samples carry CLOCK_REALTIME stamps: these
                # place each phase in it (perf script -F time,comm,sym).
                log("round's marks (unix s): " + " ".join(
                    f"{name}={t:.6f}" for name, t in
                    [("kill", m["t_kill"]), ("detected", detected)] +
                    [(p, phases[p]) for p in ("began", "asked") if phases.get(p)] +
                    [("ready", ready)] + [(p, phases[p]) for p in
                                          ("answered", "ring", "communicator", "synced")
                                          if phases.get(p)] +
                    [("stepped", m["t_resumed"])]))
        elif took:
            out["daemon"] = int(took[0]) / 1e3
        return out

    def reset_record(self, workdir, t_kill):
        """(detected_unix, ready_unix) of the job's reset after t_kill, from
        the embedded daemon's status page (its viewer link is on horovodrun's
        stderr); None if the page or the record is not there."""
        import json
        with open(os.path.join(workdir, "horovodrun.out")) as f:
            link = re.search(r"status page: (http://[^/]+)/#token=(\S+)", f.read())
        if not link:
            return None
        base, token = link.group(1), urllib.parse.unquote(link.group(2))

        def get(path):
            request = urllib.request.Request(base + path,
                                             headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())

        def field(d, *names):
            return next((d[k] for k in names if k in d), None)

        # The daemon notes the generation ready a moment after the workers may
        # already step in it: give it a second.
        for _ in range(20):
            try:
                jobs = get("/api/jobs")
                jobs = field(jobs, "jobs") if isinstance(jobs, dict) else jobs
                for job in jobs or []:
                    job_id = field(job, "jobId", "job_id")
                    detail = get(f"/api/jobs/{job_id}") if job_id else job
                    for r in field(detail, "resetHistory", "reset_history") or []:
                        detected = float(field(r, "detectedUnix", "detected_unix") or 0)
                        ready = float(field(r, "readyUnix", "ready_unix") or 0)
                        if detected >= t_kill - 1 and ready > 0:
                            return detected, ready
            except (OSError, ValueError) as e:
                log(f"status page: {e}")
                return None
            time.sleep(0.1)
        return None

    def scale_up(self):
        self.grow(slow_start_ms=0)
        self.grow(slow_start_ms=SLOW_START_MS)

    def grow(self, slow_start_ms):
        """A 3-worker job gets a 4th slot; with slow_start_ms the new worker waits that long
        before it starts (as one importing a framework does), and the row is how long the
        three running workers paused meanwhile."""
        interval = 1.0
        log("scale-up, 3 -> 4 workers" + (f", the new one starting in {slow_start_ms} ms"
                                          if slow_start_ms else ""))
        env = None
        if slow_start_ms:
            env = dict(os.environ, BENCH_SLOW_START_MS=str(slow_start_ms),
                       BENCH_SLOW_START_RANK="3")
        with tempfile.TemporaryDirectory(prefix="hvdd-bench-grow-") as workdir:
            proc, logs, hosts = self.start_elastic(workdir, 3, 4, interval, env=env)
            try:
                wait_steady(proc, logs, 3, timeout=120)
                old_logs = dict(worker_logs(logs))
                before = set(os.listdir(logs))
                with open(hosts + ".new", "w") as f:
                    f.write("localhost:4\n")
                os.rename(hosts + ".new", hosts)
                t_slot = time.time()
                t_new = None
                deadline = time.time() + 60
                while t_new is None and time.time() < deadline and proc.poll() is None:
                    for name in set(os.listdir(logs)) - before - {"stop"}:
                        steps = read_steps(os.path.join(logs, name))
                        if steps:
                            t_new = steps[0]["t"]
                    time.sleep(0.05)
                if t_new is None:
                    raise RuntimeError("the new worker never completed an allreduce")
                # Steps the running workers logged until a while after the new one's first.
                time.sleep(0.5)
                pause = 0.0
                for path in old_logs.values():
                    times = [st["t"] for st in read_steps(path) if t_slot <= st["t"] <= t_new + 0.5]
                    pause = max([pause] + [b - a for a, b in zip(times, times[1:])])
            finally:
                self.stop_elastic(proc, logs, workdir)
                check_output(workdir, proc)
        seconds = t_new - t_slot
        if slow_start_ms:
            table.append(("reset", f"scale-up, new worker starts in {slow_start_ms / 1e3:.0f} s",
                          f"{pause * 1e3:9.0f} ms", "", "",
                          f"longest pause of the 3 running workers; slot->step "
                          f"{seconds * 1e3:.0f} ms"))
            return
        table.append(("reset", "scale-up 3->4 slot->step", f"{seconds * 1e3:9.0f} ms", "", "",
                      f"discovery interval {interval * 1e3:.0f} ms included; running workers' "
                      f"longest pause {pause * 1e3:.0f} ms"))
        targets.append((seconds < interval + 0.25,
                        f"scale-up: {seconds * 1e3:.0f} ms from the new slot to the new worker's "
                        f"first allreduce (target < interval {interval * 1e3:.0f} + 250 ms)"))

    def torchrun(self):
        if not os.path.exists(TORCHRUN):
            log("no /usr/bin/torchrun: skipped")
            return
        n = 4
        log(f"torchrun restart, {n} workers")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_worker.py")
        with tempfile.TemporaryDirectory(prefix="hvdd-bench-torch-") as workdir:
            logs = os.path.join(workdir, "logs")
            os.mkdir(logs)
            out = open(os.path.join(workdir, "torchrun.out"), "w")
            env = dict(os.environ, OMP_NUM_THREADS="1")
            proc = subprocess.Popen([TORCHRUN, "--standalone", "--nnodes", "1",
                                     "--nproc_per_node", str(n), "--max_restarts", "3",
                                     # torch 1.13 on Python 3.11 cannot parse the
                                     # default "0" (enum iteration changed).
                                     "--redirects", "1", "--tee", "1",
                                     script, logs], stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env)
            try:
                seconds = measure_kill(proc, logs, n, lambda s: s["gen"] >= 1,
                                       startup_timeout=240, survivors_only=False)
            finally:
                self.stop_elastic(proc, logs, workdir)
        table.append(("reset", f"torchrun {n} workers kill->resumed", "",
                      f"{seconds * 1e3:9.0f} ms", "", "torchrun restarts the group (peer)"))
