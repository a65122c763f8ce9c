"""Where a standalone horovodd keeps its shims on SSH hosts: under
~/.horovodd/<namespace>/shims of the SSH user on each host (here this
machine's user, since the private sshd's hosts are loopback addresses).
<namespace> names the daemon, which says it at start ("... under
~/.horovodd/NS/shims there"). harness.shim_pids and kill_shims find the
shims below that dir by the logs they write there."""

import re
import shutil
from pathlib import Path

from harness import SHIM_PID_LINE, kill_shims

NAMESPACE_LINE = re.compile(r"under ~/\.horovodd/([0-9a-f]+)/shims there")


def remote_shim_root(daemon_output):
    """~/.horovodd/<namespace> of the daemon, from its start-up line."""
    match = NAMESPACE_LINE.search(daemon_output)
    assert match, "the daemon did not say where its remote shims live:\n" + daemon_output
    return Path.home() / ".horovodd" / match.group(1)


def remove_remote_shims(root):
    """Kills the shims below `root` by PID (their workers die with them), then
    removes it."""
    kill_shims(root)
    shutil.rmtree(root, ignore_errors=True)


def remote_shim_pid(root, job_id, host):
    """The pid of job_id's shim on `host` (from its log, <job>.<host>.log)."""
    log = root / "shims" / f"{job_id}.{host}.log"
    match = SHIM_PID_LINE.search(log.read_text(errors="replace"))
    assert match, f"no pid in {log}"
    return int(match.group(1))
