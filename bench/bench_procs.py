"""What bench.py's parts share: starting and ending the processes they
measure (each ended by its pid or process group, and reaped), parsing the
RESULT and STEP lines, and following the step logs of elastic jobs.
"""
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

RESULT = re.compile(r"RESULT (\w+) (.*)$")
STEP = re.compile(r"STEP t=([\d.]+)(?: cpu=([\d.]+))? rank=(\d+) size=(\d+) gen=(\d+) step=(\d+)")
# Our worker's ring connect counters, at the end of its STEP lines.
RING_COUNTERS = re.compile(r"pairs=(\d+) keys=(\d+) key_bytes=(\d+)")
# When the worker's last rejoin passed each phase (bench/hvdd_worker.cc), in order.
JOIN_TIMES = re.compile(r"join=([\d.,]+)")
# The worker's context switches so far: all threads' voluntary and
# involuntary ones, and its main thread's voluntary ones.
SWITCHES = re.compile(r"csw=(\d+),(\d+),(\d+)")
# Its minor page faults so far.
FAULTS = re.compile(r"flt=(\d+)")
JOIN_PHASES = ("began", "asked", "answered", "ring", "communicator", "synced")


def log(message):
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def fields(text):
    return {k: v for k, v in (kv.split("=", 1) for kv in text.split() if "=" in kv)}


def results(output, kind):
    out = []
    for line in output.splitlines():
        m = RESULT.search(line)
        if m and m.group(1) == kind:
            out.append(fields(m.group(2)))
    return out


def end_process(proc, grace=5.0):
    """Ends one process we started (its process group: horovodrun's workers
    are its children) and reaps it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def run(argv, timeout, env=None):
    """Runs argv in its own process group; returns (exit code, output)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_process(proc)
        output = proc.stdout.read() if proc.stdout else ""
        return 124, output
    return proc.returncode, output


def run_ranks(what, n, argv_of, env_of, timeout=900):
    """Starts one process per rank (argv_of(rank), env_of(rank) or ours), each
    in a session of its own, and waits for all of them; ends whichever is left
    by its pid. Returns rank 0's output; raises with every output if one failed."""
    procs = [subprocess.Popen(argv_of(r), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True, env=env_of(r))
             for r in range(n)]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            end_process(p)
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError(f"{what} at {n} ranks failed:\n" + "\n".join(outputs))
    return outputs[0]


def raise_process_limits():
    """Open files up to the hard limit (ours and so every process we start):
    hundreds of workers each hold a socket per ring pair, its shared memory
    and its daemon stream."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def human(size):
    return f"{size >> 20} MiB" if size >= (1 << 20) else f"{size >> 10} KiB"


def parse_step(line):
    """A worker log's STEP line as a dict (with its ring counters and join
    times where the line has them); None for any other line."""
    m = STEP.match(line)
    if not m:
        return None
    step = {"t": float(m.group(1)), "rank": int(m.group(3)), "size": int(m.group(4)),
            "gen": int(m.group(5))}
    if m.group(2):
        step["cpu"] = float(m.group(2))  # the worker's own CPU seconds so far
    c = RING_COUNTERS.search(line)
    if c:
        step["pairs"], step["keys"], step["key_bytes"] = map(int, c.groups())
    w = SWITCHES.search(line)
    if w:
        step["csw"] = tuple(int(g) for g in w.groups())
    f = FAULTS.search(line)
    if f:
        step["flt"] = int(f.group(1))
    j = JOIN_TIMES.search(line)
    if j:
        step["join"] = dict(zip(JOIN_PHASES, map(float, j.group(1).split(","))))
    return step


def read_steps(path, start=0):
    """The STEP lines of a worker's log from byte `start` on (a line cut by
    `start` is skipped): the logs grow by a line every few ms per worker, and
    reading hundreds of them whole every poll would never catch up."""
    steps = []
    try:
        with open(path) as f:
            if start > 0:
                f.seek(start)
                f.readline()
            for line in f:
                step = parse_step(line)
                if step is not None:
                    steps.append(step)
    except FileNotFoundError:
        pass
    return steps


def read_steps_from(path, offset):
    """The STEP lines of a whole lines' worth of a log from byte `offset`
    (a line start, or 0; a line cut by a first offset from file_size is
    skipped), and the offset after the last whole line read."""
    steps = []
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return steps, offset
    end = data.rfind(b"\n") + 1
    for line in data[:end].decode(errors="replace").splitlines():
        step = parse_step(line)
        if step is not None:
            steps.append(step)
    return steps, offset + end


def file_size(path):
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def worker_logs(logs):
    out = {}
    for name in os.listdir(logs):
        m = re.match(r"w-(\d+)\.log$", name)
        if m:
            out[int(m.group(1))] = os.path.join(logs, name)
    return out


def wait_steady(proc, logs, n, timeout):
    """Waits until n workers log steps of an n-sized group; returns pid -> last step."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the job ended (exit {proc.returncode}) before it was running")
        last = {}
        for pid, path in worker_logs(logs).items():
            steps = read_steps(path, max(0, file_size(path) - 4096))
            if steps and steps[-1]["size"] == n:
                last[pid] = steps[-1]
        if len(last) == n:
            # A few more steps, so every ring is warm.
            time.sleep(0.5)
            return last
        time.sleep(0.1)
    raise RuntimeError(f"{n} workers were not all running within {timeout} s")


def measure_kill(proc, logs, n, resumed, startup_timeout, survivors_only=True):
    """SIGKILLs the worker with the highest rank; returns seconds from the
    kill until every other worker (or, with survivors_only=False, every
    worker of the restarted group) logged a step that `resumed` accepts."""
    last = wait_steady(proc, logs, n, startup_timeout)
    victim = max(last, key=lambda pid: last[pid]["rank"])
    t_kill = time.time()
    os.kill(victim, signal.SIGKILL)
    want = n - 1 if survivors_only else n
    deadline = time.time() + 120
    while time.time() < deadline:
        firsts = {}
        for pid, path in worker_logs(logs).items():
            if pid == victim:
                continue
            after = [s for s in read_steps(path) if s["t"] > t_kill and resumed(s)]
            if after:
                firsts[pid] = after[0]["t"]
        if len(firsts) >= want:
            return max(sorted(firsts.values())[:want]) - t_kill
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the job did not resume within 120 s of the kill (exit {proc.poll()})")


def cpu_seconds(pids):
    """User + system CPU seconds of these processes so far (gone ones count 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces): utime, stime are 14, 15.
        rest = stat[stat.rindex(")") + 2:].split()
        total += int(rest[11]) + int(rest[12])
    return total / ticks


def clear_referenced(pid):
    """Clears the accessed bits of `pid`'s pages (root only; a gone process
    is skipped): referenced_kib then counts what it touches from here on."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("1")
    except OSError:
        pass


SMAPS_RANGE = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$")


def referenced_kib(pid):
    """KiB of `pid`'s own memory touched since clear_referenced (its heap,
    stacks and other anonymous mappings; its slots of the host's shared
    segment apart), as {"own": KiB, "shm": KiB}, or None. Files' pages
    (code) are left out: their Referenced flag is the page's, set by any
    process, and all the workers share those pages anyway."""
    own = shm = 0
    kind = None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                m = SMAPS_RANGE.match(line)
                if m:
                    name = m.group(1)
                    kind = ("own" if name in ("", "[heap]", "[stack]")
                            else "shm" if name.startswith("/memfd:horovodd") else None)
                elif kind is not None and line.startswith("Referenced:"):
                    kib = int(line.split()[1])
                    if kind == "own":
                        own += kib
                    else:
                        shm += kib
    except OSError:
        return None
    return {"own": own, "shm": shm}


def start_profile():
    """BENCH_PERF_OUT=FILE: `perf record` of the whole machine (a timer
    event: these VMs have no hardware counters; kernel call chains, the
    Release build has no frame pointers), from BENCH_PERF_LEAD_S (2) before
    the kill to 1.4 s after it, its samples stamped with CLOCK_REALTIME
    (the round's marks, logged, place the phases in it). Returns the perf
    process or None. The profiled round's figures include perf's own cost."""
    out = os.environ.get("BENCH_PERF_OUT")
    if not out:
        return None
    # perf reads every process's maps before it samples: with hundreds of
    # workers that takes a second or more, so it starts well ahead.
    lead = float(os.environ.get("BENCH_PERF_LEAD_S", "2"))
    perf = subprocess.Popen(["perf", "record", "-a", "-e", "cpu-clock", "-F", "2000", "-g",
                             "-k", "CLOCK_REALTIME", "-o", out, "--", "sleep", str(lead + 1.4)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(lead)
    return perf


def measure_reset(proc, logs, n, startup_timeout):
    """measure_kill for our elastic worker, in more detail: SIGKILLs the
    highest rank and waits until every survivor logged a step of the n - 1
    group. Returns a dict: t_kill and t_resumed (CLOCK_REALTIME seconds), and
    per survivor the ring connect work between its last step before the kill
    and its first step after it (pairs connected, keys and key bytes read)."""
    last = wait_steady(proc, logs, n, startup_timeout)
    victim = max(last, key=lambda pid: last[pid]["rank"])
    paths = worker_logs(logs)
    profile = start_profile()
    # Each log from a little before the kill on: its last step before the
    # kill is in there. Read before the kill, so that the driver's reading
    # of hundreds of logs is not in the reset it measures (the polls after
    # it read only what is new).
    starts = {pid: max(0, file_size(path) - 4096) for pid, path in paths.items()}
    last_before = {}
    for pid, path in paths.items():
        steps, starts[pid] = read_steps_from(path, starts[pid])
        if steps:
            last_before[pid] = steps[-1]
    # BENCH_TOUCHED=1: each survivor's working set across the reset, the
    # memory it touched from here until its first step of the new group (read
    # as the poll below finds that step: a few more steps may be in it, and
    # the reads cost the driver CPU inside the measured window, so it is a
    # separate run's figure, not the curve's).
    touched = os.environ.get("BENCH_TOUCHED") == "1"
    worker_touched = []
    if touched:
        for pid in paths:
            if pid != victim:
                clear_referenced(pid)
    # The daemon's CPU, sampled on a thread of its own: the loop below reads
    # hundreds of logs a poll and may see the last resume well after it.
    daemon_cpu = [(time.time(), cpu_seconds([proc.pid]))]
    sampling = threading.Event()

    def sample_daemon():
        while not sampling.wait(0.01):
            daemon_cpu.append((time.time(), cpu_seconds([proc.pid])))
    sampler = threading.Thread(target=sample_daemon, daemon=True)
    sampler.start()
    t_kill = time.time()
    os.kill(victim, signal.SIGKILL)
    worker_cpu = []
    # Each survivor's (voluntary, involuntary, main thread's voluntary)
    # switches across the reset.
    worker_switches = []
    worker_faults = []  # each survivor's minor page faults across the reset
    deadline = time.time() + 120
    firsts = {}
    work = []
    joins = []
    while time.time() < deadline:
        for pid, path in paths.items():
            # Each log is read on from where the last poll stopped, and not
            # at all once its survivor resumed: with hundreds of workers
            # logging on, rereading would outgrow the driver's share of the CPU.
            if pid == victim or pid in firsts:
                continue
            steps, starts[pid] = read_steps_from(path, starts[pid])
            for s in steps:
                if s["t"] <= t_kill:
                    last_before[pid] = s
                    continue
                if s["size"] != n - 1:
                    continue
                firsts[pid] = s["t"]
                if touched and (kib := referenced_kib(pid)) is not None:
                    worker_touched.append(kib)
                if "join" in s:
                    joins.append(s["join"])
                before = last_before.get(pid)
                if before and "cpu" in s and "cpu" in before:
                    worker_cpu.append(s["cpu"] - before["cpu"])
                if before and "csw" in s and "csw" in before:
                    worker_switches.append(tuple(a - b for a, b in zip(s["csw"], before["csw"])))
                if before and "flt" in s and "flt" in before:
                    worker_faults.append(s["flt"] - before["flt"])
                if before and "pairs" in s and "pairs" in before:
                    work.append({k: s[k] - before[k] for k in ("pairs", "keys", "key_bytes")})
                break
        if len(firsts) >= n - 1:
            # When the last survivor passed each phase of its rejoin.
            phases = {p: max(j[p] for j in joins) for p in JOIN_PHASES} if joins else {}
            # CPU the reset took, what two cores have to share out: each
            # survivor's from its last step before the kill to its first
            # after it (as it reports it), the daemon's from the kill to the
            # last survivor's first step.
            sampling.set()
            sampler.join()
            t_resumed = max(firsts.values())
            at_kill = daemon_cpu[0][1]  # taken just before the kill
            at_resume = [c for t, c in daemon_cpu if t <= t_resumed]
            # (A survivor whose last step before the kill fell outside the
            # tail read counts as the others' mean.)
            cpu = {"workers": (sum(worker_cpu) / len(worker_cpu) * (n - 1)
                               if worker_cpu else None),
                   "daemon": at_resume[-1] - at_kill if at_resume else None,
                   "switches": (tuple(statistics.median(s[i] for s in worker_switches)
                                      for i in range(3)) if worker_switches else None),
                   "faults": statistics.median(worker_faults) if worker_faults else None,
                   "touched_kib": ({k: statistics.median(t[k] for t in worker_touched)
                                    for k in ("own", "shm")} if worker_touched else None)}
            if profile is not None:
                profile.wait(timeout=30)  # its file written before the job is stopped
            return {"t_kill": t_kill, "t_resumed": t_resumed, "work": work,
                    "phases": phases, "cpu": cpu}
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    sampling.set()
    raise RuntimeError(f"the job did not resume within 120 s of the kill (exit {proc.poll()})")


def check_output(workdir, proc):
    if proc.returncode not in (0, None, -signal.SIGTERM):
        path = os.path.join(workdir, "horovodrun.out")
        with open(path) as f:
            log(f"horovodrun exited {proc.returncode}; its last output:\n" + f.read()[-2000:])
