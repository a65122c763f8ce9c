"""The status page as an operator sees it: Debian's headless Chromium (browser.py, one browser
for the module) loads the page of a real horovodd, and the tests read the page as rendered (its
DOM after the page's scripts ran, never the HTML the daemon sent): a job that grows, loses a
worker to SIGKILL and finishes, with its size, state, resets on the chart and the lost worker's
host in cooldown as they change; who may look and act (no token, the viewer token, the admin
token, whose cancel asks first); the link horovodrun prints for its embedded daemon; the page
over TLS. And the monitoring files of deploy/: the Grafana dashboard and the Prometheus rules
parse (promtool when it is installed) and name only series a running daemon's /metrics has."""

import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from browser import CHROMIUM, Browser
from harness import BUILD, EVENT_DEADLINE, HOROVODRUN, JOB_DEADLINE, REPO, wait_for
from test_horovodctl import discovery_script
from test_security import OwnDaemon

PYTHON = "/usr/bin/python3"
PROBE = Path(__file__).resolve().parent / "elastic_probe.py"
STALL_PROBE = Path(__file__).resolve().parent / "stall_probe.py"
VIEWER_TOKEN = "viewer-token-of-the-page-tests"
CLI_DEADLINE = 60
# A job that runs until it is ended; a command that never joins the job's rendezvous would be
# killed after the default --start-timeout.
SLEEPER = ["-np", 1, "-H", "localhost:1", "--start-timeout", 3600, "/bin/sleep", 600]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One Chromium for the module's tests; each opens its own tab."""
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: scripts/install_deps.sh installs it")
    chromium = Browser(tmp_path_factory.mktemp("chromium"))
    yield chromium
    chromium.close()


@pytest.fixture
def tab(browser):
    page = browser.new_page()
    yield page
    assert page.errors() == [], "the page's scripts failed"
    page.close()


def page_daemon(horovodd, tmp_path, *extra):
    """A horovodd serving its status page on a port of its choosing, with a viewer token; its
    `page_url` and `admin_token` are set."""
    viewer = tmp_path / "viewer.token"
    viewer.write_text(VIEWER_TOKEN + "\n")
    viewer.chmod(0o600)
    daemon = horovodd("--status-page-listen", "127.0.0.1:0", "--viewer-token-file", viewer,
                      *extra)
    match = re.search(r"horovodd status page on (\S+)", daemon.log())
    assert match, daemon.log()
    daemon.page_url = match.group(1)
    daemon.admin_token = daemon.token_file.read_text().strip()
    return daemon


def submit(daemon, *args, cwd):
    """horovodrun --daemon ... --detach ARGS: the job's id."""
    result = subprocess.run([str(HOROVODRUN), *daemon.client_args(), "--detach",
                             *map(str, args)], cwd=cwd, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=CLI_DEADLINE)
    assert result.returncode == 0, result.stderr + daemon.log()
    return result.stdout.strip()


def api(url, token=None, method="GET", context=None):
    """(status, JSON body) of one request to the page's API."""
    request = urllib.request.Request(url, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=EVENT_DEADLINE, context=context) as reply:
            return reply.status, json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def log_in(tab, token):
    """Types `token` into the page's login form and waits for the page to open."""
    tab.wait_for("!document.getElementById('login').hidden", "the login form")
    tab.evaluate(f"document.getElementById('login-token').value = {json.dumps(token)};"
                 "document.getElementById('login-form').requestSubmit(); true")
    tab.wait_for("!document.getElementById('jobs').hidden && document.body.dataset.access",
                 "the page to open after logging in")


def job_view(tab):
    """What the page shows of the selected job."""
    return tab.evaluate("""(() => {
      const job = document.getElementById('job');
      const rows = selector => [...document.querySelectorAll(selector + ' tbody tr')];
      const cell = (tr, col) => tr.querySelector(`[data-col="${col}"]`).innerText;
      return {
        shown: !job.hidden,
        state: job.dataset.state,
        size: job.dataset.size,
        resets: (document.querySelector('#job-summary dd[data-col="resets"]') || {}).innerText,
        steps: document.querySelectorAll('#size-chart .generation-step').length,
        reset_markers: document.querySelectorAll('#size-chart .reset-marker').length,
        hosts: rows('#hosts-table').map(tr => ({host: tr.dataset.host, state: tr.dataset.state,
                                                cooldown: cell(tr, 'cooldown')})),
        stall: (document.querySelector('#job-summary dd[data-col="stall"]') || {}).innerText,
        workers: rows('#workers-table').map(tr => ({state: tr.dataset.state,
                                                    look: tr.className,
                                                    host: cell(tr, 'host'),
                                                    pid: cell(tr, 'pid'),
                                                    rank: cell(tr, 'rank'),
                                                    completed: cell(tr, 'completed'),
                                                    step: cell(tr, 'step'),
                                                    waits_in: cell(tr, 'waits_in')})),
        events: rows('#events-table').map(tr => tr.dataset.kind + ' ' + cell(tr, 'message')),
        goodput: (document.querySelector('#job-summary dd[data-col="goodput"]') || {}).innerText,
        time_shown: !document.getElementById('goodput').hidden,
        wall: document.getElementById('goodput-wall').innerText,
        parts: Object.fromEntries(rows('#goodput-table').map(
            tr => [cell(tr, 'part'), parseFloat(cell(tr, 'seconds'))])),
      };
    })()""")


def wait_view(tab, predicate, what, timeout=EVENT_DEADLINE):
    """Reads the job's view until predicate(view) holds; that view."""
    last = {}

    def check():
        nonlocal last
        last = job_view(tab)
        return last if predicate(last) else None

    try:
        return wait_for(check, what, timeout)
    except AssertionError as error:
        raise AssertionError(f"{error}\nlast view: {json.dumps(last, indent=1)[-6000:]}")


def running(view, host=None):
    return [w for w in view["workers"]
            if w["state"] == "WORKER_RUNNING" and (host is None or w["host"] == host)]


def test_a_job_that_grows_loses_a_worker_and_finishes_as_the_page_shows_it(
        horovodd, browser, tab, tmp_path):
    daemon = page_daemon(horovodd, tmp_path)
    script, hosts = discovery_script(tmp_path / "discovery", "127.0.0.1:2")
    stop = tmp_path / "stop"
    # A PyTorch elastic job that trains until the stop file exists; a failed host sits out
    # at least two minutes, so its cooldown is still on the page when the test looks.
    job = submit(daemon, "-np", 2, "--min-np", 2, "--max-np", 3,
                 "--host-discovery-script", script, "--discovery-interval", 0.2,
                 "--blacklist-cooldown-range", 120, 240, "--start-timeout", 120,
                 "--env", f"PYTHONPATH={BUILD / 'python'}",
                 PYTHON, PROBE, "--epochs", 1, "--stop-file", stop, "--marker-dir", tmp_path,
                 cwd=tmp_path)

    # No token: the page asks for one, and its data is refused.
    tab.goto(daemon.page_url)
    tab.wait_for("!document.getElementById('login').hidden", "the login form")
    assert not tab.visible("#jobs-table")
    assert tab.evaluate("fetch('/api/jobs').then(r => r.status)") == 401
    assert tab.evaluate("fetch('/api/stream').then(r => r.status)") == 401

    # The viewer token: the jobs, then this one.
    log_in(tab, VIEWER_TOKEN)
    assert tab.text("#access") == "read-only"
    tab.wait_for(f"document.querySelector('#jobs-table tr[data-job=\"{job}\"]')",
                 "the job in the jobs table")
    tab.evaluate(f"location.hash = 'job={job}'")
    first = wait_view(tab, lambda v: v["state"] == "RUNNING" and v["size"] == "2"
                      and len(running(v)) == 2, "the job to run at size 2")
    assert {h["host"]: h["state"] for h in first["hosts"]} == {"127.0.0.1": "usable"}
    assert first["steps"] >= 1
    # What each rank reports doing: collectives completed, its step time, what it waits in.
    reporting = wait_view(
        tab, lambda v: len(running(v)) == 2 and all(
            w["completed"].isdigit() and int(w["completed"]) > 0 and w["step"].endswith("s")
            for w in running(v)), "each rank's collectives and step time on the page")
    assert all(w["waits_in"] for w in running(reporting)), reporting

    # The viewer sees no buttons, and the daemon refuses what they would do.
    assert not tab.visible("#cancel-job")
    assert tab.count("#hosts-table button") == 0 or not tab.visible("#hosts-table button")
    refused = tab.evaluate(
        f"fetch('/api/jobs/{job}/cancel', {{method: 'POST', headers: "
        f"{{Authorization: 'Bearer {VIEWER_TOKEN}'}}}}).then(r => r.json().then(b => [r.status, b]))")
    assert refused[0] == 403 and "the viewer token may only read" in refused[1]["error"]

    # It grows: localhost joins with one slot.
    hosts.write("127.0.0.1:2\nlocalhost:1")
    grown = wait_view(tab, lambda v: v["size"] == "3" and len(running(v, "localhost")) == 1
                      and v["steps"] >= 2, "the job to grow to 3")
    assert {h["host"]: h["state"] for h in grown["hosts"]} == {"127.0.0.1": "usable",
                                                                "localhost": "usable"}

    # Its worker on localhost is killed; the page gives its pid.
    victim = running(grown, "localhost")[0]
    os.kill(int(victim["pid"]), signal.SIGKILL)
    after = wait_view(
        tab, lambda v: v["size"] == "2" and len(running(v)) == 2
        and any(h["host"] == "localhost" and h["state"] == "cooldown" for h in v["hosts"])
        and v["reset_markers"] > grown["reset_markers"],
        "the reset after the SIGKILL, and localhost in cooldown")
    cooldown = next(h for h in after["hosts"] if h["host"] == "localhost")["cooldown"]
    assert re.fullmatch(r"\d+m \d+s|\d+s", cooldown), cooldown
    assert cooldown != "0s"
    assert int(after["resets"]) > int(grown["resets"] or 0)
    assert all(w["host"] == "127.0.0.1" for w in running(after))
    assert any(w["pid"] == victim["pid"] and w["state"] == "WORKER_FAILED"
               for w in after["workers"]), after["workers"]
    assert any(e.startswith("MEMBERSHIP") for e in after["events"]), after["events"]
    # Where its time went: the reset is a part of it, and training the most of it.
    timed = wait_view(tab, lambda v: v["time_shown"] and v["parts"].get("reset", 0) > 0,
                      "the reset's time on the page")
    assert set(timed["parts"]) == {"training", "starting", "waiting", "detection", "reset",
                                   "replay", "stall"}, timed["parts"]
    assert re.fullmatch(r"\d+\.\d%", timed["goodput"]), timed["goodput"]
    assert timed["goodput"] in timed["wall"], timed
    listed = tab.evaluate(f"document.querySelector('#jobs-table tr[data-job=\"{job}\"] "
                          f"td[data-col=\"goodput\"]').innerText")
    assert re.fullmatch(r"\d+\.\d%", listed), listed
    # The countdown goes on between the daemon's updates.
    tab.wait_for(f"(document.querySelector('#hosts-table tr[data-host=\"localhost\"] "
                 f"td[data-col=\"cooldown\"]') || {{}}).innerText !== {json.dumps(cooldown)}",
                 "the cooldown to count down")
    reset_titles = tab.evaluate("[...document.querySelectorAll('#size-chart .reset-marker title')]"
                                ".map(t => t.textContent)")
    assert any(t.startswith("reset to generation") for t in reset_titles), reset_titles

    screenshot = tab.screenshot(tmp_path / "status-page.png")
    print(f"screenshot: {screenshot}")

    # It finishes.
    stop.touch()
    ended = wait_view(tab, lambda v: v["state"] == "SUCCEEDED", "the job to succeed",
                      timeout=JOB_DEADLINE)
    assert ended["size"] in ("2", "0")
    # The parts add up to the job's wall time, training the biggest of them.
    wall = float(re.search(r"of ([\d.]+) s", ended["wall"]).group(1))
    assert sum(ended["parts"].values()) == pytest.approx(wall, rel=0.01, abs=0.1), ended
    assert max(ended["parts"], key=ended["parts"].get) == "training", ended["parts"]
    assert not tab.visible("#cancel-job")
    assert tab.evaluate(f"document.querySelector('#jobs-table tr[data-job=\"{job}\"]')"
                        ".dataset.state") == "SUCCEEDED"
    tab.screenshot(tmp_path / "status-page-ended.png")


def test_the_culprit_of_a_stall_is_highlighted_and_the_spare_listed(horovodd, tab, tmp_path):
    # Two workers on localhost and a hot spare, which goes to 127.0.0.1 (a host without
    # members). Rank 1 sleeps inside step 3 while its heartbeat runs: once the others have waited
    # past the warning time its row is the stall's culprit, and the summary names it.
    daemon = page_daemon(horovodd, tmp_path)
    job = submit(daemon, "-np", 2, "--min-np", 1, "-H", "localhost:2,127.0.0.1:1",
                 "--hot-spares", 1, "--stall-check-warning-time-seconds", 3,
                 "--stall-check-shutdown-time-seconds", 3600, "--start-timeout", 120,
                 "--env", f"PYTHONPATH={BUILD / 'python'}",
                 PYTHON, STALL_PROBE, "--marker-dir", tmp_path, "--epochs", 50,
                 "--sleep", "1:3:3600", cwd=tmp_path)
    tab.goto(daemon.page_url)
    log_in(tab, VIEWER_TOKEN)
    tab.evaluate(f"location.hash = 'job={job}'")
    spare = wait_view(tab, lambda v: any(w["state"] == "WORKER_SPARE_READY" for w in v["workers"]),
                      "the spare, ready, in the workers table", timeout=JOB_DEADLINE)
    listed = next(w for w in spare["workers"] if w["state"] == "WORKER_SPARE_READY")
    assert listed["host"] == "127.0.0.1" and listed["look"] == "worker-spare", listed

    marker = tmp_path / "slept-1-3"
    wait_for(lambda: marker.exists() and marker.read_text(), "rank 1 to fall asleep",
             timeout=JOB_DEADLINE)
    pid, host = marker.read_text().split()
    stalled = wait_view(tab, lambda v: any(w["look"] == "worker-culprit" for w in v["workers"]),
                        "the culprit's row highlighted", timeout=JOB_DEADLINE)
    culprits = [w for w in stalled["workers"] if w["look"] == "worker-culprit"]
    assert [(w["rank"], w["host"], w["pid"]) for w in culprits] == [("1", host, pid)], culprits
    assert f"rank 1 ({host}, pid {pid})" in stalled["stall"], stalled["stall"]
    assert "missing" in stalled["stall"], stalled["stall"]
    tab.screenshot(tmp_path / "status-page-stall.png")

    status, _ = api(daemon.page_url + f"api/jobs/{job}/cancel", daemon.admin_token, "POST")
    assert status == 200
    wait_view(tab, lambda v: v["state"] == "CANCELLED", "the job to be cancelled",
              timeout=JOB_DEADLINE)


def test_the_admin_cancels_a_job_after_saying_yes(horovodd, tab, tmp_path):
    daemon = page_daemon(horovodd, tmp_path)
    job = submit(daemon, *SLEEPER, cwd=tmp_path)
    tab.goto(daemon.page_url)
    log_in(tab, daemon.admin_token)
    assert tab.text("#access") == "admin"
    tab.evaluate(f"location.hash = 'job={job}'")
    tab.wait_for("document.getElementById('job').dataset.state && "
                 "!document.getElementById('cancel-job').hidden", "the job and its cancel button")
    tab.wait_for("document.querySelector('#hosts-table tr[data-host=\"localhost\"] "
                 "button[data-action=\"drain\"]')", "the admin's drain button")

    # Asked first: "no" leaves it running.
    tab.click("#cancel-job")
    tab.wait_for("document.getElementById('confirm').open", "the confirmation")
    assert job in tab.text("#confirm-text")
    tab.click("#confirm-no")
    tab.wait_for("!document.getElementById('confirm').open", "the dialog to close")
    status, body = api(daemon.page_url + f"api/jobs/{job}", daemon.admin_token)
    assert status == 200 and body["state"] not in ("CANCELLED", "FAILED", "SUCCEEDED"), body

    tab.click("#cancel-job")
    tab.wait_for("document.getElementById('confirm').open", "the confirmation")
    tab.click("#confirm-yes")
    tab.wait_for("document.getElementById('job').dataset.state === 'CANCELLED'",
                 "the job to be cancelled")
    # The job's stream may show the cancel before the POST's answer says how it went.
    tab.wait_for("document.getElementById('notice').textContent.includes('done')",
                 "the notice that the cancel was done")
    status, body = api(daemon.page_url + f"api/jobs/{job}", VIEWER_TOKEN)
    assert body["state"] == "CANCELLED" and "cancelled from the status page" in body["reason"]


def test_no_token_and_the_viewer_token_are_refused_by_the_server(horovodd, tmp_path):
    daemon = page_daemon(horovodd, tmp_path)
    job = submit(daemon, *SLEEPER, cwd=tmp_path)
    base = daemon.page_url
    for path in ("api/session", "api/jobs", f"api/jobs/{job}", "api/stream"):
        status, body = api(base + path)
        assert status == 401 and "requires a token" in body["error"], (path, body)
        assert api(base + path, "not-a-token")[0] == 401
    assert api(base + "api/jobs", VIEWER_TOKEN)[0] == 200
    for path in (f"api/jobs/{job}/cancel", "api/hosts/localhost/drain",
                 "api/hosts/localhost/undrain"):
        status, body = api(base + path, VIEWER_TOKEN, method="POST")
        assert status == 403 and "viewer token may only read" in body["error"], (path, body)
    assert api(base + f"api/jobs/{job}", VIEWER_TOKEN)[1]["state"] != "CANCELLED"
    status, body = api(base + "api/hosts/localhost/drain?job=" + job, daemon.admin_token,
                       method="POST")
    assert (status, body) == (200, {"job_ids": [job]})
    # The page's refusals are logged as the gRPC API's are (once a second per reason).
    log = daemon.log()
    assert "refused status page GET /api/session from ipv4:127.0.0.1:" in log, log
    assert "viewer_token_on_admin_call" in log, log


def test_horovodrun_prints_a_link_to_its_embedded_daemons_page(horovodrun, tab):
    run = horovodrun(*SLEEPER)
    link = run.wait_for_line(r"horovodrun: status page: (http://127\.0\.0\.1:\d+/#token=\w+)$",
                             "the status page's link").group(1)
    tab.goto(link)
    tab.wait_for("document.querySelector('#jobs-table tr[data-job]')", "the job on the page")
    # The token became this tab's login and left the address bar.
    assert tab.evaluate("location.hash") == ""
    assert tab.text("#access") == "read-only"
    assert "/bin/sleep 600" in tab.text("#jobs-table")
    run.proc.send_signal(signal.SIGINT)  # Ctrl-C: the job is cancelled, horovodrun ends
    assert run.wait() == 130, run.output()
    # Off when asked: HOROVODD_STATUS_PAGE_LISTEN="" (checked on a run that ends at once).
    quiet = horovodrun("-np", 1, "-H", "localhost:1", "true",
                       env={"HOROVODD_STATUS_PAGE_LISTEN": ""})
    assert quiet.wait() == 0, quiet.output()
    assert "status page" not in quiet.output()


def test_the_page_speaks_tls_as_the_grpc_api_does(horovodd, certs, tmp_path):
    daemon = page_daemon(horovodd, tmp_path,
                         "--tls-cert-file", certs / "server.pem", "--tls-key-file",
                         certs / "server.key", "--tls-client-ca-file", certs / "ca.pem",
                         "--tls-worker-cert-file", certs / "client.pem",
                         "--tls-worker-key-file", certs / "client.key")
    assert daemon.page_url.startswith("https://127.0.0.1:"), daemon.page_url
    client = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    client.load_cert_chain(certs / "client.pem", certs / "client.key")
    status, body = api(daemon.page_url + "api/session", VIEWER_TOKEN, context=client)
    assert status == 200 and body["access"] == "read"
    # Mutual TLS: no client certificate, no page.
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        api(daemon.page_url + "api/session", VIEWER_TOKEN,
            context=ssl.create_default_context(cafile=str(certs / "ca.pem")))
    # Plain HTTP is not answered.
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        api(daemon.page_url.replace("https://", "http://") + "api/session", VIEWER_TOKEN)


def test_the_page_is_refused_beyond_loopback_without_tls(tmp_path):
    result = subprocess.run(
        [str(BUILD / "bin" / "horovodd"), "--listen", "127.0.0.1:0", "--state-dir",
         str(tmp_path / "state"), "--metrics-listen", "", "--status-page-listen", "0.0.0.0:0"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=EVENT_DEADLINE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "status_page_listen 0.0.0.0:0 is beyond loopback without TLS" in result.stderr


# ---- deploy/grafana and deploy/prometheus

GRAFANA = REPO / "deploy" / "grafana" / "horovodd.json"
PROMETHEUS = REPO / "deploy" / "prometheus"
# Series Prometheus makes itself for each scrape, not read from /metrics.
PROMETHEUS_OWN = {"up"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
                "or", "unless", "offset"}


def series_in(expr):
    """The series a PromQL expression (or a Grafana label_values() query) names."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    text = re.sub(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,[^)]*\)", r"\1", text)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][\w:]*", text):
        following = text[match.end():].lstrip()
        if following.startswith("(") or match.group(0) in PROMQL_WORDS:
            continue  # a function or an operator
        if match.start() > 0 and (text[match.start() - 1].isdigit() or
                                  text[match.start() - 1] == "."):
            continue  # 1e3, 0.5
        names.add(match.group(0))
    return names


def exposed_series(page):
    """Every series name of a /metrics page: samples, and those its # TYPE lines announce
    (a counter with no sample yet; a histogram's _bucket, _sum and _count)."""
    names = set()
    for line in page.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            names.add(name)
            if kind == "histogram":
                names.update({f"{name}_bucket", f"{name}_sum", f"{name}_count"})
        elif line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][\w:]*", line).group(0))
    return names


def dashboard_queries(dashboard):
    """Every query of the dashboard: its panels' targets and its variables'."""
    panels = list(dashboard["panels"])
    for panel in dashboard["panels"]:
        panels += panel.get("panels", [])
    queries = [t["expr"] for p in panels for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["query"]["query"])
    return panels, queries


def test_the_parser_finds_the_series_an_expression_names():
    assert series_in('sum by (state) (horovodd_jobs{state="running", instance=~"$i"})') == \
        {"horovodd_jobs"}
    assert series_in("histogram_quantile(0.9, sum by (le) (rate(x_bucket[$__rate_interval])))"
                     " / on (a) y > 1e3 and up == 0") == {"x_bucket", "y", "up"}
    assert series_in("label_values(horovodd_workers, instance)") == {"horovodd_workers"}


def test_dashboard_and_alert_rules_name_only_series_a_running_daemon_exports(tmp_path):
    daemon = OwnDaemon(tmp_path, "horovodd", "--listen", "127.0.0.1:0",
                       "--metrics-listen", "127.0.0.1:0")
    try:
        with urllib.request.urlopen(f"http://{daemon.metrics}/metrics",
                                    timeout=EVENT_DEADLINE) as reply:
            exposed = exposed_series(reply.read().decode())
    finally:
        daemon.stop()

    dashboard = json.loads(GRAFANA.read_text())
    assert dashboard["title"] == "horovodd" and dashboard["uid"] == "horovodd"
    assert isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels, queries = dashboard_queries(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in panels:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], panel["title"]

    rules = yaml.safe_load((PROMETHEUS / "horovodd-rules.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    assert {a["alert"] for a in alerts} >= {"HorovoddDown", "HorovoddJobStalled",
                                            "HorovoddResetsHigh"}
    for alert in alerts:
        assert alert["labels"]["severity"] in ("warning", "critical")
        assert alert["annotations"]["summary"]
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert [job["job_name"] for job in config["scrape_configs"]] == ["horovodd"]
    for rule_file in config["rule_files"]:
        assert (PROMETHEUS / rule_file).exists(), rule_file

    named = set()
    for expr in queries + [a["expr"] for a in alerts]:
        named |= series_in(expr)
    missing = sorted(named - exposed - PROMETHEUS_OWN)
    assert not missing, f"named but not in /metrics: {missing}"
    # Jobs by state, workers, resets and their duration, failures, daemon health.
    assert {"horovodd_jobs", "horovodd_workers", "horovodd_resets_total",
            "horovodd_reset_latency_seconds_bucket", "horovodd_worker_failures_total",
            "horovodd_rpc_requests_total", "horovodd_auth_failures_total", "up"} <= named

    promtool = shutil.which("promtool")
    if promtool is None:
        return  # Debian's prometheus package has it; the structure checks above stand
    for args in (["check", "config", PROMETHEUS / "prometheus.yml"],
                 ["check", "rules", PROMETHEUS / "horovodd-rules.yml"],
                 ["test", "rules", PROMETHEUS / "horovodd-rules.test.yml"]):
        done = subprocess.run([promtool, *map(str, args)], capture_output=True, text=True,
                              timeout=CLI_DEADLINE)
        assert done.returncode == 0, f"promtool {args}:\n{done.stdout}{done.stderr}"
