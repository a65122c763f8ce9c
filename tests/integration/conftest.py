import pytest

from harness import ELASTIC_TRAIN, HOROVODRUN, Run


def pytest_collection_modifyitems(config, items):
    missing = [p for p in (HOROVODRUN, ELASTIC_TRAIN) if not p.exists()]
    if missing:
        raise pytest.UsageError(f"build first (scripts/test.sh does): missing {missing}")


@pytest.fixture
def horovodrun(tmp_path):
    """Starts horovodrun runs in tmp_path; kills whatever is left at the end."""
    runs = []

    def start(*args, env=None, cwd=None, prefix=()):
        run = Run(args, cwd=cwd or tmp_path, env=env, prefix=prefix)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.cleanup()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A private sshd on 127.0.0.2 and 127.0.0.3 (tests/integration/sshd.py) for one test
    module; stopped, with everything it started, at the module's end."""
    from sshd import Sshd

    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


# ---- A real horovodd for the tests that talk to a running daemon (horovodctl, horovodrun --daemon).
import re  # noqa: E402 (appended section)
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

from harness import BUILD, EVENT_DEADLINE, kill_shims  # noqa: E402

HOROVODD = BUILD / "bin" / "horovodd"


class HorovoddProcess:
    """One real horovodd on 127.0.0.1, port 0. Its output goes to a file (a
    pipe nobody drains would stall its logging); `address` is parsed from its
    "horovodd listening on ADDR" line."""

    def __init__(self, directory, extra_args, state_dir):
        if not HOROVODD.exists():
            pytest.fail(f"build first: missing {HOROVODD}")
        self.log_path = directory / "horovodd.log"
        self.state_dir = state_dir
        args = [str(HOROVODD), "--listen", "127.0.0.1:0", "--state-dir", str(state_dir),
                "--metrics-listen", "", *[str(a) for a in extra_args]]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=directory, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + EVENT_DEADLINE
        while True:
            match = re.search(r"horovodd listening on (\S+)", self.log())
            if match:
                self.address = match.group(1)
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"horovodd did not start (exit {self.proc.returncode}):\n{self.log()}")
            time.sleep(0.05)

    @property
    def token_file(self):
        """The admin token the daemon made in its state dir (0600)."""
        return self.state_dir / "admin.token"

    def client_args(self):
        """--daemon and --token-file for horovodrun and horovodctl."""
        return ["--daemon", self.address, "--token-file", str(self.token_file)]

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=90):
        """Sends `sig` (SIGTERM: the daemon ends its jobs and exits 0) and waits;
        SIGKILL if it is still there after `timeout`. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        return self.proc.returncode


@pytest.fixture
def horovodd(tmp_path):
    """start(*extra_args, state_dir=None) -> HorovoddProcess. Each daemon gets
    its own directory (state in <dir>/state unless `state_dir` is given, so a
    restarted daemon can reuse one); all are stopped by PID at the end."""
    daemons = []

    def start(*extra_args, state_dir=None):
        directory = tmp_path / f"horovodd-{len(daemons) + 1}"
        directory.mkdir()
        daemon = HorovoddProcess(directory, extra_args, state_dir or directory / "state")
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        daemon.stop()
    # SIGTERM leaves running jobs to the next daemon, under their shims.
    kill_shims(tmp_path)


# ---- Test certificates, made with the openssl CLI (test_security.py, test_status_page.py).
import shutil  # noqa: E402

CERT_DEADLINE = 60


def openssl(*args, cwd):
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True,
                   timeout=CERT_DEADLINE)


@pytest.fixture
def certs(tmp_path):
    """A test CA, a server certificate for 127.0.0.1 and a client certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    d = tmp_path / "certs"
    d.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", 2,
            "-subj", "/CN=horovodd test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN=horovodd test {name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", 2, "-out", f"{name}.pem",
                "-extfile", f"{name}.ext", cwd=d)
    return d
