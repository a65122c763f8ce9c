#!/usr/bin/env python3
"""ha_takeover: how long a standby horovodd takes to hold a running job after the leader's
machine is lost, against the leader's lease TTL, and how many steps the job loses.

Per TTL: a real three-member etcd on loopback, a leader and a standby horovodd (each its own
state dir and address, as on two machines; tests/integration/ha_cluster.py), an elastic job of
two workers on two SSH hosts (the private sshd on 127.0.0.2 and 127.0.0.3) under the leader's
remote shims. Mid-training the leader and its local shims are SIGKILLed; the time from the
kill to the standby's "job ... taken back" is the takeover. The job then runs to its end under
the new leader; steps lost = its steps minus those of the same job undisturbed (a baseline run
first), i.e. the steps a reset would have rolled back (goal: 0: the workers, none on the lost
machine, train through the takeover).

A program, not a test: ctest and CI never run it. Needs root (sshd), etcd-server, a build.

    bench/ha_takeover.py [--build build] [--ttls 2,5,10] [--epochs 40]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--ttls", default="2,5,10")
    parser.add_argument("--epochs", type=int, default=40)
    args = parser.parse_args()
    os.environ["HVDD_BUILD_DIR"] = str(Path(args.build).resolve())
    # Imported once HVDD_BUILD_DIR says where the binaries are.
    from ha_cluster import HaPair
    from harness import HostsFile, read_result
    from remote_shims import remote_shim_root, remove_remote_shims
    from sshd import Sshd
    from test_daemon_restart_ssh import HOSTS, submit_over_ssh

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sshd = Sshd(tmp / "sshd").start()
        try:
            def one(ttl, kill):
                work = tmp / f"ttl{ttl}-{'kill' if kill else 'base'}"
                work.mkdir()
                HostsFile(work, "\n".join(f"{host}:1" for host in HOSTS))
                ha = HaPair(work, lease_ttl=ttl, env={"HOSTS_FILE": str(work / "hosts.txt")})
                roots = set()
                try:
                    a = ha.start("a")
                    a.wait_for_output("leading:", "a to lead")
                    b = ha.start("b")
                    b.wait_for_output("standby: ", "b to stand by")
                    job_id = submit_over_ssh(a, sshd, work, epochs=args.epochs, delay_ms=15)
                    roots.add(remote_shim_root(a.output()))
                    before = a.training(job_id, 2)
                    took = None
                    daemon = a
                    if kill:
                        time.sleep(1)  # mid-training
                        ha.kill_host(a)
                        killed = time.monotonic()
                        b.wait_for_output(f"job {job_id} taken back", "the takeover", timeout=120)
                        took = time.monotonic() - killed
                        daemon = b
                    final = daemon.ended(job_id)
                    result = read_result(work / "result.json")
                    return {"took": took, "state": final["state"], "resets": final.get("resets", 0),
                            "generation_kept": final["generation"] == before["generation"],
                            "steps": result["steps"],
                            "exact": all(n == result["samples_per_epoch"][0]
                                         for n in result["samples_per_epoch"])}
                finally:
                    ha.cleanup()
                    for root in roots:
                        remove_remote_shims(root)
                    sshd.kill_sessions()

            ttls = [int(t) for t in args.ttls.split(",")]
            base = one(ttls[0], kill=False)
            print(f"baseline (no takeover): {base['steps']} steps, {base['state']}")
            print(f"{'lease TTL':>10} {'takeover':>10} {'state':>10} {'resets':>7} "
                  f"{'steps lost':>11} {'samples once':>13}")
            for ttl in ttls:
                r = one(ttl, kill=True)
                print(f"{ttl:>9}s {r['took']:>9.2f}s {r['state']:>10} {r['resets']:>7} "
                      f"{r['steps'] - base['steps']:>11} {str(r['exact']):>13}", flush=True)
        finally:
            sshd.stop()


if __name__ == "__main__":
    main()
