// horovodd's status page. What it shows comes from the daemon's JSON (the
// fields `horovodctl --output json` prints, by the proto's names) over one
// live feed of server-sent events, GET /api/stream (page_stream.h); what it
// does (cancel a job, drain a host) goes to the daemon's POST routes, which
// check the admin token themselves (page_routes.h). Nothing is fetched from
// anywhere but the daemon.
//
// The token (viewer or admin) goes with every request in an Authorization
// header, and is kept in this tab's sessionStorage: the page's origin alone
// (a cookie would go to every port of the host). It comes from the login
// form, or from the link horovodrun prints (".../#token=...").
//
// A field that JobStatus, WorkerStatus or HostStatus gains arrives in the
// JSON with no change to the daemon: one more entry in the column lists
// below shows it. An entry with `when` shows only once some row has the
// field (a daemon that sends it).
'use strict';

// ---- What the page shows

// {key, title, value(row) -> text, cell(row, td) to fill the cell itself, when(row)}
const JOB_COLUMNS = [
  {key: 'job', title: 'Job', value: j => j.job_id},
  {key: 'name', title: 'Name or command',
   value: j => j.spec.name || (j.spec.argv || []).join(' ')},
  {key: 'state', title: 'State', cell: (j, td) => badge(td, j.state)},
  {key: 'size', title: 'Size', value: j => j.size},
  {key: 'minmax', title: 'Min / max', value: j => `${j.min_np} / ${j.max_np || '-'}`},
  {key: 'generation', title: 'Generation', value: j => j.generation},
  {key: 'resets', title: 'Resets', value: j => j.resets},
  // The share of the job's time spent training on kept work (JobStatus.goodput).
  {key: 'goodput', title: 'Goodput', value: j => goodput(j), when: hasGoodput},
  {key: 'age', title: 'Age', cell: (j, td) => since(td, j.created_unix, j.ended_unix)},
];

const SUMMARY_FIELDS = [
  {key: 'size', title: 'Size', value: j => j.size},
  {key: 'minmax', title: 'Min / max', value: j => `${j.min_np} / ${j.max_np || '-'}`},
  {key: 'generation', title: 'Generation', value: j => j.generation},
  {key: 'resets', title: 'Resets', value: j => j.resets},
  {key: 'last_commit', title: 'Last commit', value: j => j.last_commit},
  {key: 'goodput', title: 'Goodput', value: j => goodput(j), when: hasGoodput},
  {key: 'age', title: 'Age', cell: (j, dd) => since(dd, j.created_unix, j.ended_unix)},
  {key: 'started', title: 'Started', value: j => clock(j.started_unix)},
  {key: 'ended', title: 'Ended', value: j => clock(j.ended_unix)},
  {key: 'command', title: 'Command', value: j => (j.spec.argv || []).join(' '), wide: true},
  {key: 'reason', title: 'Reason', value: j => j.reason, wide: true},
  {key: 'stall', title: 'Stall', value: j => stallText(j.stall), when: j => 'stall' in j,
   wide: true},
];

const HOST_COLUMNS = [
  {key: 'host', title: 'Host', value: h => h.host},
  {key: 'slots', title: 'Slots', value: h => h.slots},
  {key: 'state', title: 'State', cell: (h, td) => badge(td, hostState(h))},
  {key: 'cooldown', title: 'Cooldown left', cell: (h, td) => cooldown(td, h)},
  {key: 'actions', title: '', cell: (h, td) => hostActions(td, h)},
];

// Per worker: what each rank waits in and its step time come from its
// heartbeats' reports (activity; activity_unix 0: none yet). Hot spares are
// workers in the SPARE_STARTING / SPARE_READY states; workerRowClass marks
// them, the culprits of a stall and the stragglers.
const WORKER_COLUMNS = [
  {key: 'rank', title: 'Rank', value: w => (w.rank >= 0 ? w.rank : '-')},
  {key: 'worker', title: 'Worker', value: w => w.worker_id},
  {key: 'host', title: 'Host', value: w => w.host},
  {key: 'pid', title: 'PID', value: w => w.pid || '-'},
  {key: 'state', title: 'State', cell: (w, td) => badge(td, w.state, w.state.replace('WORKER_', ''))},
  {key: 'exit', title: 'Exit', value: w => (isGone(w) ? w.exit_code : '')},
  {key: 'last_commit', title: 'Last commit', value: w => w.last_commit},
  {key: 'resets', title: 'Resets', value: w => w.resets},
  {key: 'completed', title: 'Collectives', value: w => (reported(w) ? w.activity.completed : ''),
   when: w => 'activity' in w},
  {key: 'step', title: 'Step time', value: w => stepTime(w), when: w => 'activity' in w},
  {key: 'waits_in', title: 'Waits in', value: w => waitsIn(w), when: w => 'activity' in w},
  {key: 'lost', title: 'Lost / step', value: w => lostPerStep(w),
   when: w => w.lost_seconds_per_step > 0},
];

// Where the job's time went: JobGoodput's parts, in the order shown, as
// horovodctl status and /metrics (its `part` label) name them.
const GOODPUT_PARTS = ['training', 'starting', 'waiting', 'detection', 'reset', 'replay', 'stall'];
const GOODPUT_COLUMNS = [
  {key: 'part', title: 'Part', value: p => p.part},
  {key: 'seconds', title: 'Seconds', value: p => p.seconds.toFixed(3)},
  {key: 'share', title: 'Share', value: p => percent(p.share)},
  {key: 'bar', title: '', cell: (p, td) => shareBar(td, p)},
];

const EVENT_COLUMNS = [
  {key: 'time', title: 'Time', value: e => clock(e.time_unix)},
  {key: 'kind', title: 'Kind', value: e => e.kind},
  {key: 'generation', title: 'Gen.', value: e => e.generation || ''},
  {key: 'code', title: 'Code', value: e => e.code},
  {key: 'message', title: 'Message', value: e => e.message, wrap: true},
];

const EVENTS_SHOWN = 200;  // newest first
const EVENTS_KEPT = 2000;  // and every MEMBERSHIP event, for the chart

// The row's look, most telling first: the culprit of the stall now named,
// a straggler, a spare, a worker that is gone. `culprits` holds the worker
// ids the job's stall names.
function workerRowClass(w, culprits) {
  if (isGone(w)) return 'worker-gone';
  if (culprits.has(w.worker_id)) return 'worker-culprit';
  if (w.straggler) return 'worker-straggler';
  if (w.state.startsWith('WORKER_SPARE_')) return 'worker-spare';
  return '';
}

// "allreduce 'grad.w1' waited 12s; missing: rank 1 (localhost, pid 4242)".
function stallText(stall) {
  const c = stall.collective || {};
  const who = (stall.culprits || []).map(
      x => `rank ${x.rank} (${x.host}, pid ${x.pid}${stall.kind === 'link' ? `, to rank ${x.peer}` : ''})`);
  const waited = c.since_unix ? ` since ${clock(c.since_unix)}` : '';
  const then = stall.evicted ? '; evicted' :
      (stall.evict_unix ? `; evicted at ${clock(stall.evict_unix)} if it lasts` : '');
  return `${c.operation || 'collective'} '${c.name || ''}' waited${waited}; ` +
         `${stall.kind || 'missing'}: ${who.join(', ')}${then}`;
}

function lostPerStep(w) {
  return `${(w.lost_seconds_per_step * 1e3).toFixed(0)} ms${w.straggler ? ' (straggler)' : ''}`;
}

// ---- State

const page = {
  access: null,       // 'admin' | 'read' once the daemon said so
  clockOffset: 0,     // the daemon's clock minus this browser's, in seconds
  jobs: [],           // summaries (JobsJson)
  jobId: null,        // the job shown below the table (#job=ID)
  job: null,          // its status (JobJson)
  events: [],         // its events but worker output, oldest first
  membership: [],     // its MEMBERSHIP events, for the chart
  lastSeq: 0,
};
const $ = id => document.getElementById(id);
const serverNow = () => Date.now() / 1000 + page.clockOffset;

// ---- Formatting

function percent(x) {
  return typeof x === 'number' ? `${(x * 100).toFixed(1)}%` : '';
}

function duration(seconds) {
  if (!(seconds >= 0)) return '';
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

function hasGoodput(j) {
  return !!j.goodput && j.goodput.wall_seconds > 0;
}

function goodput(j) {
  return hasGoodput(j) ? percent(j.goodput.goodput) : '';
}

// Each part of the job's time, its seconds and share of the wall time.
function goodputParts(j) {
  const g = j.goodput;
  return GOODPUT_PARTS.map(part => ({part, seconds: g[`${part}_seconds`] || 0,
                                     share: (g[`${part}_seconds`] || 0) / g.wall_seconds}));
}

function shareBar(td, p) {
  const bar = document.createElement('span');
  bar.className = `share-bar part-${p.part}`;
  bar.style.width = `${Math.min(100, p.share * 100).toFixed(1)}%`;
  td.className = 'share';
  td.appendChild(bar);
}

// Whether the worker's heartbeats have reported what it does.
function reported(w) {
  return w.activity && w.activity_unix > 0;
}

function stepTime(w) {
  if (!reported(w) || !(w.activity.step_seconds > 0)) return '';
  return `${w.activity.step_seconds.toPrecision(3)}s`;
}

// "allreduce grad.w1 (12s)"; '-' when it waits in nothing.
function waitsIn(w) {
  if (!reported(w)) return '';
  const wait = w.activity.waiting;
  if (!wait || !wait.operation) return '-';
  const set = wait.process_set ? ` [set ${wait.process_set}]` : '';
  return `${wait.operation} ${wait.name}${set} (${duration(wait.waited_seconds)})`;
}

function clock(unix) {
  if (!unix) return '';
  return new Date(unix * 1000).toLocaleTimeString([], {hour12: false});
}

function badge(td, state, text) {
  const span = document.createElement('span');
  span.className = `state state-${state}`;
  span.textContent = text || state;
  td.appendChild(span);
}

function isGone(w) {
  return ['WORKER_SUCCEEDED', 'WORKER_FAILED', 'WORKER_REMOVED'].includes(w.state);
}

// A host in cooldown for the rest of the job says -1 seconds: blacklisted.
function hostState(h) {
  return h.state === 'cooldown' && h.cooldown_seconds_left < 0 ? 'blacklisted' : h.state;
}

// Ages and cooldowns count on between updates (tick), on the daemon's clock.
function since(cell, start, end) {
  if (!start) return;
  cell.dataset.since = start;
  if (end) cell.dataset.until = end;
  cell.textContent = duration((end || serverNow()) - start);
}

// When a host's cooldown ends, on the daemon's clock to the second.
function cooldownEnd(h) {
  return h.state === 'cooldown' && h.cooldown_seconds_left >= 0
      ? Math.round(serverNow() + h.cooldown_seconds_left) : null;
}

function cooldown(td, h) {
  if (h.state !== 'cooldown') return;
  if (h.cooldown_seconds_left < 0) {
    td.textContent = 'for the rest of the job';
    return;
  }
  td.dataset.cooldownEnds = cooldownEnd(h);
  td.textContent = duration(Math.max(0, cooldownEnd(h) - serverNow()));
}

function tick() {
  for (const cell of document.querySelectorAll('[data-since]')) {
    const end = cell.dataset.until ? Number(cell.dataset.until) : serverNow();
    cell.textContent = duration(end - Number(cell.dataset.since));
  }
  for (const cell of document.querySelectorAll('[data-cooldown-ends]')) {
    cell.textContent = duration(Math.max(0, Number(cell.dataset.cooldownEnds) - serverNow()));
  }
}

// ---- Tables

function fill(td, column, row) {
  td.dataset.col = column.key;
  if (column.wrap) td.className = 'wrap';
  if (column.cell) {
    column.cell(row, td);
  } else {
    const value = column.value(row);
    td.textContent = value === undefined || value === null ? '' : String(value);
    if (td.textContent.length > 40) td.title = td.textContent;  // when cut short
  }
}

const rowKeys = new WeakMap();        // <tr> -> its row's key
const rowSignatures = new WeakMap();  // <tr> -> what it was drawn from

// Rebuilds `table` from `rows`. options.decorate(tr, row) adds a row's
// attributes; with options.key(row), a row whose options.signature(row) is
// what it was keeps its element, so that a button in it survives the update
// that arrives while it is being clicked.
function renderTable(table, columns, rows, options = {}) {
  const shown = columns.filter(c => !c.when || rows.some(c.when));
  const head = document.createElement('tr');
  for (const column of shown) {
    const th = document.createElement('th');
    th.textContent = column.title;
    head.appendChild(th);
  }
  const headings = shown.map(c => c.title).join('\t');
  if (table.dataset.headings !== headings) {
    table.tHead.replaceChildren(head);
    table.tBodies[0].replaceChildren();
    table.dataset.headings = headings;
  }
  const signatureOf = options.signature || (row => JSON.stringify(row));
  const old = new Map();
  if (options.key) {
    for (const tr of table.tBodies[0].rows) old.set(rowKeys.get(tr), tr);
  }
  const body = [];
  for (const row of rows) {
    const key = options.key ? String(options.key(row)) : '';
    const signature = options.key ? signatureOf(row) : '';
    const kept = old.get(key);
    if (kept && rowSignatures.get(kept) === signature) {
      body.push(kept);
      continue;
    }
    const tr = document.createElement('tr');
    for (const column of shown) {
      const td = document.createElement('td');
      fill(td, column, row);
      tr.appendChild(td);
    }
    rowKeys.set(tr, key);
    rowSignatures.set(tr, signature);
    if (options.decorate) options.decorate(tr, row);
    body.push(tr);
  }
  table.tBodies[0].replaceChildren(...body);
}

function renderJobs() {
  $('jobs-empty').hidden = page.jobs.length > 0;
  renderTable($('jobs-table'), JOB_COLUMNS, page.jobs, {
    key: j => j.job_id,
    // What the table shows changes; the newest commit alone does not.
    signature: j => JSON.stringify({...j, last_commit: 0, selected: j.job_id === page.jobId}),
    decorate: (tr, j) => {
      tr.dataset.job = j.job_id;
      tr.dataset.state = j.state;
      if (j.job_id === page.jobId) tr.classList.add('selected');
    },
  });
}

function renderJob() {
  const section = $('job');
  section.hidden = !page.jobId;
  if (!page.jobId) return;
  $('job-title').textContent = page.jobId;
  const job = page.job;
  $('job-state').textContent = job ? job.state : '';
  $('job-state').className = job ? `state state-${job.state}` : 'state';
  section.dataset.state = job ? job.state : '';
  section.dataset.size = job ? job.size : '';
  $('cancel-job').hidden = !job || ['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(job.state);
  if (!job) return;
  const summary = [];
  for (const field of SUMMARY_FIELDS) {
    if (field.when && !field.when(job)) continue;
    const dd = document.createElement('dd');
    fill(dd, field, job);
    if (dd.textContent === '') continue;  // not ended yet, no reason given, ...
    const dt = document.createElement('dt');
    dt.textContent = field.title;
    const div = document.createElement('div');
    if (field.wide) div.className = 'wide';
    div.append(dt, dd);
    summary.push(div);
  }
  $('job-summary').replaceChildren(...summary);
  renderTable($('hosts-table'), HOST_COLUMNS, job.hosts, {
    key: h => h.host,
    // A cooldown counts down in every status: its end stays put.
    signature: h => JSON.stringify({...h, job: job.state,
                                    cooldown_seconds_left: cooldownEnd(h)}),
    decorate: (tr, h) => {
      tr.dataset.host = h.host;
      tr.dataset.state = hostState(h);
    },
  });
  const culprits = new Set(
      job.stall && !job.stall.evicted ? (job.stall.culprits || []).map(c => c.worker_id) : []);
  // The look goes into the row, so that a row redraws when it changes.
  const workers = [...job.workers].map(w => ({...w, look: workerRowClass(w, culprits)})).sort(
      (a, b) => (isGone(a) - isGone(b)) || ((a.rank < 0) - (b.rank < 0)) || (a.rank - b.rank) ||
          (a.worker_id - b.worker_id));
  renderTable($('workers-table'), WORKER_COLUMNS, workers, {
    decorate: (tr, w) => {
      tr.dataset.worker = w.worker_id;
      tr.dataset.state = w.state;
      if (w.look) tr.classList.add(w.look);
    },
  });
  const timed = hasGoodput(job);
  $('goodput').hidden = !timed;
  if (timed) {
    $('goodput-wall').textContent =
        `${goodput(job)} of ${job.goodput.wall_seconds.toFixed(1)} s spent training on kept work`;
    $('goodput-wall').dataset.wall = job.goodput.wall_seconds;
    renderTable($('goodput-table'), GOODPUT_COLUMNS, goodputParts(job), {
      decorate: (tr, p) => {
        tr.dataset.part = p.part;
        tr.dataset.seconds = p.seconds;
      },
    });
  }
  renderEvents();
  drawChart();
}

function renderEvents() {
  const newest = page.events.slice(-EVENTS_SHOWN).reverse();
  renderTable($('events-table'), EVENT_COLUMNS, newest, {
    key: e => e.seq,
    signature: () => '',
    decorate: (tr, e) => {
      tr.dataset.seq = e.seq;
      tr.dataset.kind = e.kind;
    },
  });
}

// ---- The size chart: each generation a step, each reset a red line

const SVG = 'http://www.w3.org/2000/svg';

function svg(parent, name, attributes, text) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (text !== undefined) element.textContent = text;
  parent.appendChild(element);
  return element;
}

function drawChart() {
  const chart = $('size-chart');
  chart.replaceChildren();
  const job = page.job;
  if (!job) return;
  // As wide as it is drawn, so that its text keeps its size.
  const W = Math.max(400, Math.round(chart.getBoundingClientRect().width) || 800);
  const H = 220, left = 40, right = 16, top = 16, bottom = 28;
  chart.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const steps = page.membership.map(e => ({t: e.time_unix, size: e.size, generation: e.generation}));
  const start = Math.min(job.started_unix || job.created_unix || serverNow(),
                         ...steps.map(s => s.t));
  const end = Math.max(job.ended_unix || serverNow(), start + 1);
  const top_size = Math.max(1, job.max_np || 0, job.size, ...steps.map(s => s.size));
  const x = t => left + ((t - start) / (end - start)) * (W - left - right);
  const y = size => H - bottom - (size / top_size) * (H - top - bottom);

  const ticks = top_size <= 8 ? top_size : 4;
  for (let i = 0; i <= ticks; i++) {
    const size = Math.round((top_size * i) / ticks);
    svg(chart, 'line', {class: 'grid', x1: left, x2: W - right, y1: y(size), y2: y(size)});
    svg(chart, 'text', {x: left - 8, y: y(size) + 4, 'text-anchor': 'end'}, size);
  }
  svg(chart, 'line', {class: 'axis', x1: left, x2: W - right, y1: y(0), y2: y(0)});
  svg(chart, 'text', {x: left, y: H - 8}, clock(start));
  svg(chart, 'text', {x: W - right, y: H - 8, 'text-anchor': 'end'},
      job.ended_unix ? clock(end) : 'now');

  let path = `M ${x(start)} ${y(0)}`;
  for (const step of steps) path += ` H ${x(step.t)} V ${y(step.size)}`;
  path += ` H ${x(end)}`;
  svg(chart, 'path', {class: 'size-area', d: `${path} V ${y(0)} Z`});
  svg(chart, 'path', {class: 'size-line', d: path});
  for (const step of steps) {
    const dot = svg(chart, 'circle', {class: 'generation-step', cx: x(step.t), cy: y(step.size),
                                      r: 3.5, 'data-generation': step.generation,
                                      'data-size': step.size});
    svg(dot, 'title', {}, `generation ${step.generation}: ${step.size} workers`);
  }
  for (const reset of job.reset_history || []) {
    const at = x(Math.max(start, reset.detected_unix));
    const marker = svg(chart, 'line', {class: 'reset-marker', x1: at, x2: at, y1: top,
                                       y2: y(0), 'data-generation': reset.generation});
    svg(marker, 'title', {}, `reset to generation ${reset.generation}: ${reset.cause}`);
    svg(chart, 'text', {class: 'reset-label', x: at + 3, y: top + 10}, `g${reset.generation}`);
  }
}

// ---- Actions (admin): asked twice, checked by the daemon

function hostActions(td, h) {
  if (!page.job || ['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(page.job.state)) return;
  const drained = h.state === 'drained';
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'action small';
  button.dataset.action = drained ? 'undrain' : 'drain';
  button.textContent = drained ? 'Undrain' : 'Drain';
  const job = page.jobId;
  button.addEventListener('click', () => act(
      drained ? `Undrain ${h.host}` : `Drain ${h.host}`,
      `/api/hosts/${encodeURIComponent(h.host)}/${button.dataset.action}?job=${encodeURIComponent(job)}`,
      drained ? `Let job ${job} start workers on ${h.host} again?`
              : `Drain ${h.host} in job ${job}? No new workers start there, and its workers ` +
                'leave at their next commit.',
      drained ? 'Undrain' : 'Drain'));
  td.appendChild(button);
}

// The answer comes from the buttons' own handlers, set afresh for each
// question, not from the dialog's 'close' event: that event is queued, so one
// from the last question could still arrive after the next was asked and
// answer it (a lost or a doubled action).
function confirmAction(question, yes) {
  return new Promise(resolve => {
    const dialog = $('confirm');
    const yesButton = $('confirm-yes');
    const noButton = $('confirm-no');
    $('confirm-text').textContent = question;
    yesButton.textContent = yes;
    const answer = value => event => {
      event.preventDefault();  // no form submission: this handler closes the dialog
      yesButton.onclick = noButton.onclick = dialog.oncancel = null;
      dialog.close();
      resolve(value);
    };
    yesButton.onclick = answer(true);
    noButton.onclick = answer(false);
    dialog.oncancel = answer(false);  // Escape
    dialog.showModal();
  });
}

// Asks `question`; on `yes`, POSTs to `url` and says how it went.
async function act(what, url, question, yes) {
  if (!(await confirmAction(question, yes))) return;
  let answer;
  try {
    const response = await api(url, {method: 'POST'});
    answer = {ok: response.ok, body: await response.json().catch(() => ({}))};
  } catch (error) {
    answer = {ok: false, body: {error: String(error)}};
  }
  notice(answer.ok ? `${what}: done` : `${what}: refused: ${answer.body.error || 'no answer'}`,
         !answer.ok);
}

let noticeTimer = null;
function notice(text, isError) {
  const box = $('notice');
  box.textContent = text;
  box.className = isError ? 'error' : '';
  box.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { box.hidden = true; }, 6000);
}

// ---- Talking to the daemon

const TOKEN_KEY = 'horovodd-token';

function credentials() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? {Authorization: `Bearer ${token}`} : {};
}

function api(url, options = {}) {
  return fetch(url, {cache: 'no-store', ...options,
                     headers: {...credentials(), ...(options.headers || {})}});
}

// A link's "#token=..." becomes this tab's login, and leaves the address bar.
function takeTokenFromLink() {
  const match = location.hash.match(/^#token=([^&]+)$/);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(null, '', location.pathname + location.search);
}

// ---- The live feed: server-sent events read from a fetch, which (unlike
// EventSource) can carry the Authorization header

function selectedJob() {
  const match = location.hash.match(/^#job=(.+)$/);
  return match ? decodeURIComponent(match[1]) : null;
}

function setConnection(text, className) {
  const badge = $('connection');
  badge.textContent = text;
  badge.className = `connection ${className || ''}`;
}

function addEvents(events) {
  for (const event of events) {
    if (event.seq <= page.lastSeq) continue;  // seen before a reconnect
    page.lastSeq = event.seq;
    page.events.push(event);
    if (event.kind === 'MEMBERSHIP') page.membership.push(event);
  }
  if (page.events.length > EVENTS_KEPT) page.events.splice(0, page.events.length - EVENTS_KEPT);
}

const FEED_HANDLERS = {
  hello: session => {
    setSession(session);
    setConnection('live', 'live');
  },
  jobs: data => { page.jobs = data.jobs; renderJobs(); },
  job: job => { page.job = job; renderJob(); },
  log: data => {
    addEvents(data.events);
    // A change of state shows at once, before the next status (the last one
    // of an ended job may come after the daemon has gone).
    const changed = data.events.filter(e => e.kind === 'STATE' || e.kind === 'JOB_ENDED');
    if (page.job && changed.length) {
      page.job.state = changed[changed.length - 1].state;
      renderJob();
    } else {
      renderEvents();
      drawChart();
    }
  },
  missing: data => {
    $('job-missing').textContent = data.error;
    $('job-missing').hidden = false;
  },
};

// One message of the stream ("event: NAME", "data: ...", "id: N" lines).
function dispatch(block, feedState) {
  let name = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') name = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id') feedState.lastEventId = value;
  }
  if (data.length && FEED_HANDLERS[name]) FEED_HANDLERS[name](JSON.parse(data.join('\n')));
}

let feed = null;  // {controller, lastEventId}

function closeFeed() {
  if (feed) feed.controller.abort();
  feed = null;
}

async function openFeed() {
  closeFeed();
  Object.assign(page, {jobId: selectedJob(), job: null, events: [], membership: [], lastSeq: 0});
  $('job-missing').hidden = true;
  renderJobs();
  renderJob();
  const mine = {controller: new AbortController(), lastEventId: ''};
  feed = mine;
  const url = '/api/stream' + (page.jobId ? `?job=${encodeURIComponent(page.jobId)}` : '');
  while (feed === mine) {
    try {
      const headers = mine.lastEventId ? {'Last-Event-ID': mine.lastEventId} : {};
      const response = await api(url, {headers, signal: mine.controller.signal});
      if (response.status === 401 || response.status === 403) {
        start();  // the token no longer opens the page: say so
        return;
      }
      if (!response.ok || !response.body) throw new Error(`answered ${response.status}`);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          dispatch(buffer.slice(0, end), mine);
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      if (feed !== mine) return;  // closed on purpose
    }
    setConnection('reconnecting', 'lost');
    await new Promise(resolve => setTimeout(resolve, 2000));
  }
}

function setSession(session) {
  page.access = session.access;
  page.clockOffset = session.server_time_unix - Date.now() / 1000;
  document.body.dataset.access = session.access;
  $('access').textContent = session.access === 'admin' ? 'admin' : 'read-only';
  $('login-button').hidden = session.access === 'admin';
  $('logout-button').hidden = !sessionStorage.getItem(TOKEN_KEY);
}

function show(which) {
  $('login').hidden = which !== 'login';
  $('jobs').hidden = which !== 'app';
  if (which !== 'app') $('job').hidden = true;
}

function showLogin(error) {
  closeFeed();
  setConnection('not logged in');
  document.body.dataset.access = '';
  $('logout-button').hidden = true;
  $('login-button').hidden = true;
  $('login-error').textContent = error || '';
  show('login');
  $('login-token').focus();
}

async function start() {
  let response;
  try {
    response = await api('/api/session');
  } catch (error) {
    setConnection('daemon unreachable', 'lost');
    setTimeout(start, 2000);
    return;
  }
  if (response.status === 401 || response.status === 403) {
    const body = await response.json().catch(() => ({}));
    // A token the daemon refuses is of no use kept.
    const refused = sessionStorage.getItem(TOKEN_KEY) !== null;
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(refused ? body.error : '');
    return;
  }
  if (!response.ok) {
    setConnection(`daemon answered ${response.status}`, 'lost');
    setTimeout(start, 2000);
    return;
  }
  setSession(await response.json());
  show('app');
  openFeed();
}

function logIn(event) {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('login-token').value.trim());
  $('login-token').value = '';
  start();
}

function logOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  start();
}

document.addEventListener('DOMContentLoaded', () => {
  takeTokenFromLink();
  $('login-form').addEventListener('submit', logIn);
  $('logout-button').addEventListener('click', logOut);
  $('login-button').addEventListener('click', () => showLogin());
  $('jobs-table').addEventListener('click', event => {
    const row = event.target.closest('tr[data-job]');
    if (row) location.hash = `job=${encodeURIComponent(row.dataset.job)}`;
  });
  $('cancel-job').addEventListener('click', () => {
    const job = page.jobId;
    act(`Cancel ${job}`, `/api/jobs/${encodeURIComponent(job)}/cancel`,
        `Cancel job ${job}? Its workers are stopped and the job ends CANCELLED.`,
        'Cancel the job');
  });
  window.addEventListener('hashchange', () => {
    takeTokenFromLink();
    if (page.access) openFeed();
  });
  window.addEventListener('resize', drawChart);
  setInterval(tick, 1000);
  start();
});
