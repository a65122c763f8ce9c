"""Bad input is refused before anything starts, with one line naming it."""

import pytest

from harness import DISCOVER_HOSTS, ELASTIC_TRAIN


@pytest.mark.parametrize("args, named", [
    (["--min-np", 4, "--max-np", 2, "--host-discovery-script", DISCOVER_HOSTS, ELASTIC_TRAIN],
     "--min-np"),
    (["-np", 8, "--min-np", 2, "--max-np", 4, "--host-discovery-script", DISCOVER_HOSTS,
      ELASTIC_TRAIN], "-np"),
    (["--min-np", 2, "--host-discovery-script", "./no-such-script.sh", ELASTIC_TRAIN],
     "no-such-script.sh"),
    (["--frobnicate", "-np", 2, ELASTIC_TRAIN], "--frobnicate"),
])
def test_bad_flags_fail_fast_with_one_line(horovodrun, args, named):
    run = horovodrun(*args)
    assert run.wait(timeout=60) == 2
    assert len(run.lines) == 1, run.output()
    assert run.lines[0].startswith("horovodrun: error:")
    assert named in run.lines[0]
    assert not run.all_worker_pids()


def test_malformed_yaml_names_the_file(horovodrun, tmp_path):
    config = tmp_path / "job.yaml"
    config.write_text("min_np: [2\nmax_np: 4\n")
    run = horovodrun("--config-file", config, ELASTIC_TRAIN)
    assert run.wait(timeout=60) == 2
    assert len(run.lines) == 1 and "job.yaml" in run.lines[0], run.output()


def test_help_explains_the_flags(horovodrun):
    run = horovodrun("--help")
    assert run.wait(timeout=60) == 0
    text = run.output()
    for flag in ("--min-np", "--max-np", "--host-discovery-script", "--elastic-timeout",
                 "--blacklist-cooldown-range", "--daemon"):
        assert flag in text
