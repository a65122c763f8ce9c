"""`cmake --install` into a staging prefix, then everything from there alone:
a training program built against the installed package with
find_package(horovodd), run as a 2-worker job by the installed horovodrun; a
Python script run the same way, importing the installed package; the
installed horovodd started as the installed unit starts it, answering the
installed horovodctl. Nothing that ran may lean on the build or source tree:
no RUNPATH, include or link path, import path or text file names them.

Needs the whole build (scripts/build.sh), since it installs what it built."""

import glob
import os
import re
import shutil
import signal
import queue
import subprocess
import threading
from pathlib import Path

import pytest

from harness import BUILD, EVENT_DEADLINE, JOB_DEADLINE, REPO, _pid_alive

CONSUMER_SOURCE = REPO / "tests" / "install" / "consumer"
# Trees the installed files must not name: the build dir and the checkout.
FORBIDDEN = [str(BUILD.resolve()), str(REPO.resolve())]


def names_forbidden(text):
    return [tree for tree in FORBIDDEN if tree in text]


def run_checked(args, timeout=EVENT_DEADLINE, **kwargs):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{args} exited {result.returncode}:\n" \
        + result.stdout[-4000:] + result.stderr[-4000:]
    return result


def clean_env(stage, python_dir=None):
    """The environment of a user of the staged install: no build-tree import
    or library paths (the lead's pytest runs with PYTHONPATH=<build>/python)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "HVDD_BUILD_DIR")}
    env["PATH"] = os.pathsep.join([str(stage / "bin"), "/usr/bin", "/bin"])
    if python_dir is not None:
        env["PYTHONPATH"] = str(python_dir)
    return env


def run_job(stage, args, cwd, env, timeout=JOB_DEADLINE):
    """STAGE/bin/horovodrun ARGS to the end; returns (exit code, output).
    horovodrun runs in a session of its own, killed with its workers (by the
    PIDs they print) whatever happens."""
    proc = subprocess.Popen([str(stage / "bin" / "horovodrun")] + [str(a) for a in args],
                            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output = ""
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        raise AssertionError(f"horovodrun did not finish within {timeout}s:\n{output[-6000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        for pid in re.findall(r" pid (\d+)", output or ""):
            if _pid_alive(int(pid)):
                os.kill(int(pid), signal.SIGKILL)
    return proc.returncode, output


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    """The staging prefix, installed once for the module."""
    prefix = tmp_path_factory.mktemp("stage")
    run_checked(["cmake", "--install", BUILD, "--prefix", prefix])
    return prefix


def python_dir(stage):
    found = glob.glob(str(stage / "lib" / "python3*" / "dist-packages"))
    assert len(found) == 1, f"one dist-packages dir under {stage}/lib, got {found}"
    return Path(found[0])


def test_installs_binaries_library_headers_package_config_python_unit_and_config(stage):
    expected = ["bin/horovodd", "bin/horovodrun", "bin/horovodctl", "lib/libhorovodd.so",
                "include/horovodd/horovodd.h", "include/horovodd/elastic.h",
                "include/horovodd/tensor.h", "lib/cmake/horovodd/horovoddConfig.cmake",
                "lib/cmake/horovodd/horovoddConfigVersion.cmake",
                "lib/cmake/horovodd/horovoddTargets.cmake",
                "etc/horovodd/horovodd.yaml", "lib/systemd/system/horovodd.service"]
    missing = [p for p in expected if not (stage / p).exists()]
    assert not missing, missing
    package = python_dir(stage) / "horovodd"
    assert (package / "__init__.py").exists() and (package / "torch").is_dir()
    assert glob.glob(str(package / "_horovodd*.so")), "no _horovodd extension installed"
    assert (stage / "etc/horovodd/horovodd.yaml").read_text() == \
        (REPO / "config" / "horovodd.yaml").read_text()


def test_installed_unit_names_the_installed_paths_and_verifies(stage):
    unit = stage / "lib/systemd/system/horovodd.service"
    text = unit.read_text()
    assert f"ExecStart={stage}/bin/horovodd --config {stage}/etc/horovodd/horovodd.yaml\n" in text
    assert "/usr/local/bin" not in text
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing: scripts/install_deps.sh installs systemd")
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                            timeout=EVENT_DEADLINE)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == "", \
        result.stdout + result.stderr


def test_installed_files_do_not_name_the_build_or_source_tree(stage):
    """Text files (CMake package, unit, Python sources) name no build or source
    path, and no installed ELF file has a RUNPATH/RPATH into them. (Debug info
    does record the build dir; nothing loads from it.)"""
    offenders = []
    for path in sorted(p for p in stage.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        if data.startswith(b"\x7fELF"):
            dynamic = run_checked(["objdump", "-p", path]).stdout
            paths = " ".join(re.findall(r"^\s*(?:RUNPATH|RPATH)\s+(\S+)", dynamic, re.M))
            if names_forbidden(paths):
                offenders.append(f"{path}: RUNPATH {paths}")
        elif path.suffix != ".pyc" and names_forbidden(data.decode("utf-8", "replace")):
            offenders.append(str(path))
    assert not offenders, offenders


@pytest.fixture(scope="module")
def consumer(stage, tmp_path_factory):
    """tests/install/consumer, copied out of the checkout and built against
    the staged package only."""
    work = tmp_path_factory.mktemp("consumer")
    source = work / "src"
    shutil.copytree(CONSUMER_SOURCE, source)
    build = work / "build"
    env = clean_env(stage)
    run_checked(["cmake", "-S", source, "-B", build, f"-DCMAKE_PREFIX_PATH={stage}",
                 "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], env=env)
    run_checked(["cmake", "--build", build, "--verbose"], timeout=JOB_DEADLINE, env=env)
    return build


def test_consumer_compiles_and_links_against_the_staged_package_only(stage, consumer):
    flags = (consumer / "CMakeFiles" / "consumer.dir" / "flags.make").read_text()
    link = (consumer / "CMakeFiles" / "consumer.dir" / "link.txt").read_text()
    assert f"{stage}/include" in flags, flags
    assert f"{stage}/lib/libhorovodd.so" in link, link
    assert not names_forbidden(flags + link), flags + link
    libraries = run_checked(["ldd", consumer / "consumer"]).stdout
    assert f"{stage}/lib/libhorovodd.so" in libraries, libraries
    assert not names_forbidden(libraries), libraries


def test_two_worker_cpp_job_from_the_staged_tree(stage, consumer, tmp_path):
    code, output = run_job(stage, ["-np", "2", consumer / "consumer"], cwd=tmp_path,
                           env=clean_env(stage))
    assert code == 0, output
    lines = re.findall(r"consumer rank (\d+)/(\d+) sum (\S+) commits (\d+) pid \d+", output)
    assert sorted(lines) == [("0", "2", "3", "1"), ("1", "2", "3", "1")], output


def test_two_worker_python_job_from_the_staged_tree(stage, tmp_path):
    packages = python_dir(stage)
    script = tmp_path / "consumer.py"
    shutil.copy(CONSUMER_SOURCE / "consumer.py", script)
    code, output = run_job(stage, ["-np", "2", "/usr/bin/python3", script], cwd=tmp_path,
                           env=clean_env(stage, packages))
    assert code == 0, output
    lines = re.findall(r"py-consumer rank (\d+)/(\d+) sum (\S+) pid \d+ from (\S+)", output)
    assert sorted(l[:3] for l in lines) == [("0", "2", "3"), ("1", "2", "3")], output
    for *_, imported_from in lines:
        assert Path(imported_from).resolve() == (packages / "horovodd" / "__init__.py").resolve()


def test_staged_daemon_started_like_the_unit_answers_horovodctl(stage, tmp_path):
    """The unit's ExecStart (the staged binary and config), with a free port,
    a private state dir and no metrics listener instead of the system ones."""
    env = clean_env(stage)
    state = tmp_path / "state"
    daemon = subprocess.Popen(
        [str(stage / "bin" / "horovodd"), "--config", str(stage / "etc/horovodd/horovodd.yaml"),
         "--listen", "127.0.0.1:0", "--state-dir", str(state), "--metrics-listen", ""],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, start_new_session=True)
    lines = queue.Queue()

    def read_stdout():
        for line in daemon.stdout:
            lines.put(line.strip())
        lines.put(None)  # horovodd closed its stdout: exited

    threading.Thread(target=read_stdout, daemon=True).start()
    try:
        address = None
        while address is None:
            line = lines.get(timeout=EVENT_DEADLINE)
            assert line is not None, f"horovodd exited ({daemon.wait(30)}) before listening"
            m = re.match(r"^horovodd listening on (\S+)$", line)
            address = m.group(1) if m else None
        listed = run_checked([stage / "bin" / "horovodctl", "--daemon", address,
                              "--token-file", state / "admin.token", "list"], env=env)
        assert not names_forbidden(listed.stdout + listed.stderr)
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(EVENT_DEADLINE)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait(30)
    assert daemon.returncode == 0
