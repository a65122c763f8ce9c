"""The documentation stays true to the tree: the flag table of docs/running-jobs.md lists
exactly the flags `horovodrun --help` prints, the layout listing of docs/architecture/README.md
names exactly the folders that make up the tree, and every relative link of the Markdown
pages (those git tracks, and docs/) leads to a file (and heading) that exists. Each failure names what is missing or extra."""

import re
import subprocess

from harness import HOROVODRUN, REPO

RUNNING_JOBS = REPO / "docs" / "running-jobs.md"
ARCHITECTURE_INDEX = REPO / "docs" / "architecture" / "README.md"


def between(path, begin, end):
    """The text of `path` between the two marker lines."""
    text = path.read_text()
    assert begin in text and end in text, f"{path.relative_to(REPO)} lacks {begin} ... {end}"
    return text[text.index(begin) + len(begin):text.index(end)]


# ---- (a) horovodrun's flags


def help_flags():
    """Every spelling of every flag `horovodrun --help` lists ("-np,--num-proc N" gives -np and
    --num-proc). Option lines are indented by CLI11's two spaces; help text runs on at the
    description column, and the footer's example lines are indented deeper, so neither is read
    as an option."""
    done = subprocess.run([str(HOROVODRUN), "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    flags = []
    for line in done.stdout.splitlines():
        m = re.match(r"^ {1,4}(-[-\w]+(?:,\s*-[-\w]+)*)", line)
        if m:
            flags += [f.strip() for f in m.group(1).split(",")]
    return flags


def table_flags(table):
    """The flags named in the first column of each row of a Markdown flag table (group rows,
    in bold, name none)."""
    flags = []
    for row in table.splitlines():
        cells = row.split(" | ")
        if not row.startswith("| `") or len(cells) < 2:
            continue
        flags += re.findall(r"`(-[-\w]+)", cells[0])
    return flags


def differences(documented, actual, where, source):
    """One message per kind of disagreement between what `where` names and what `source` has,
    or none."""
    problems = []
    missing = sorted(set(actual) - set(documented))
    extra = sorted(set(documented) - set(actual))
    twice = sorted({f for f in documented if documented.count(f) > 1})
    if missing:
        problems.append(f"{where} lacks {missing}, which {source} has")
    if extra:
        problems.append(f"{where} names {extra}, which {source} does not have")
    if twice:
        problems.append(f"{where} names more than once: {twice}")
    return problems


def test_flag_table_lists_exactly_the_flags_of_help():
    flags = help_flags()
    assert {"-np", "--num-proc", "-cb", "--fusion-threshold-mb", "--mpi", "-H", "-h"} <= set(flags)
    table = between(RUNNING_JOBS, "<!-- horovodrun flags: begin -->",
                    "<!-- horovodrun flags: end -->")
    problems = differences(table_flags(table), flags, "docs/running-jobs.md's flag table",
                           "horovodrun --help")
    assert not problems, "\n".join(problems)


def test_the_flag_check_sees_a_wrong_table():
    """The comparison above fails on a table that lacks a flag, names one that does not exist,
    or lists one twice (so a passing check means something)."""
    flags = ["-np", "--num-proc", "--mpi"]
    table = ("| flag | meaning |\n| --- | --- |\n| **General** | |\n"
             "| `-np`, `--num-proc N` | workers |\n| `--mpii` | typo |\n| `-np` | again |\n")
    problems = differences(table_flags(table), flags, "the table", "--help")
    assert problems == ["the table lacks ['--mpi'], which --help has",
                        "the table names ['--mpii'], which --help does not have",
                        "the table names more than once: ['-np']"], problems


# ---- (b) the layout listing


def listed_folders():
    """The first word of each line of the layout listing (a folder, ending in /)."""
    listing = between(ARCHITECTURE_INDEX, "<!-- layout: begin -->", "<!-- layout: end -->")
    folders = []
    for line in listing.splitlines():
        if not line.strip() or line.startswith("```"):
            continue
        folders.append(line.split()[0].rstrip("/"))
    return folders


def tracked_folders():
    """Every folder holding a file git tracks, relative to the repository."""
    done = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    folders = set()
    for path in done.stdout.decode().split("\0"):
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folders.add("/".join(parts[:depth]))
    return folders


def layout_problems(listed, tracked, with_cmake):
    """What the listing gets wrong. Under src/ it names exactly the folders with a
    CMakeLists.txt (each one target); elsewhere every entry exists, and every top-level folder
    is named, itself or, when only its subfolders are, each of its subfolders."""
    problems = []
    src_listed = [f for f in listed if f == "src" or f.startswith("src/")]
    problems += differences(src_listed, sorted(with_cmake), "the layout listing",
                            "src/ (folders with a CMakeLists.txt)")
    rest = [f for f in listed if f not in src_listed]
    twice = sorted({f for f in rest if rest.count(f) > 1})
    if twice:
        problems.append(f"the layout listing names more than once: {twice}")
    absent = sorted(f for f in rest if f not in tracked)
    if absent:
        problems.append(f"the layout listing names folders that are not in the tree: {absent}")
    for top in sorted(f for f in tracked if "/" not in f and f != "src"):
        if top in rest:
            continue
        children = sorted(f for f in tracked if f.count("/") == 1 and f.startswith(top + "/"))
        unnamed = [c for c in children if c not in rest] or ([] if children else [top])
        if unnamed:
            problems.append(f"the layout listing lacks {unnamed}")
    return problems


def test_layout_listing_names_every_folder_once():
    tracked = tracked_folders()
    with_cmake = {str(p.parent.relative_to(REPO)) for p in (REPO / "src").rglob("CMakeLists.txt")}
    assert "src/daemon/job" in with_cmake and "src/cli/horovodrun" in with_cmake
    problems = layout_problems(listed_folders(), tracked, with_cmake)
    assert not problems, "\n".join(problems)


def test_the_layout_check_sees_a_wrong_listing():
    tracked = {"src", "src/a", "src/b", "src/b/c", "docs", "tests", "tests/unit", "tests/gpu",
               ".ci"}
    with_cmake = {"src/a", "src/b/c"}
    listed = ["src/a", "src/b", "src/a", "docs", "docs", "tests/unit", "bench"]
    assert layout_problems(listed, tracked, with_cmake) == [
        "the layout listing lacks ['src/b/c'], which src/ (folders with a CMakeLists.txt) has",
        "the layout listing names ['src/b'], which src/ (folders with a CMakeLists.txt) does "
        "not have",
        "the layout listing names more than once: ['src/a']",
        "the layout listing names more than once: ['docs']",
        "the layout listing names folders that are not in the tree: ['bench']",
        "the layout listing lacks ['.ci']",
        "the layout listing lacks ['tests/gpu']",
    ]


# ---- (c) links


def heading_anchors(path):
    """The anchors GitHub gives the headings of a Markdown file."""
    anchors = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"^#{1,6} (.*)", line)):
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def broken_links(page):
    """Relative links of `page` that lead nowhere: no such file, or no such heading."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in heading_anchors(dest):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_relative_link_resolves():
    done = subprocess.run(["git", "ls-files", "-z", "*.md"], cwd=REPO, capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    pages = sorted({REPO / p for p in done.stdout.decode().split("\0") if p}
                   | set((REPO / "docs").rglob("*.md")))
    assert REPO / "README.md" in pages and REPO / "docs" / "running-jobs.md" in pages
    problems = [f"{page.relative_to(REPO)}: {link}"
                for page in pages for link in broken_links(page)]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_link_check_sees_a_broken_link(tmp_path):
    (tmp_path / "other.md").write_text("# A heading, with `code`\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-heading-with-code) [web](https://example.org)\n"
                    "[gone](missing.md) [bad](other.md#nowhere) [self](#nor-here)\n"
                    "```\n[in code](ignored.md)\n```\n")
    assert broken_links(page) == ["missing.md (no such file)", "other.md#nowhere (no such heading)",
                                  "#nor-here (no such heading)"]
