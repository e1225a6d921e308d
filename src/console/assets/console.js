// The console's one script (an ES module served from the package; the CSP allows no inline script).
// Every time shows in the reader's zone, UTC on hover. The decisions page's live tail: while on, polls the decisions JSON endpoint with the page's
// filters every few seconds and adds the decisions newer than the newest row on top.

const POLL_MS = 3000;

const pad = (n) => String(n).padStart(2, '0');

/** `iso` in the reader's zone, as the server writes UTC: `YYYY-MM-DD HH:MM:SS` and the zone's name. */
function localTime(iso) {
  const d = new Date(iso);
  const zone =
    new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' })
      .formatToParts(d)
      .find((p) => p.type === 'timeZoneName')?.value ?? '';
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zone}`.trim();
}

/** A `<time>` the server rendered in UTC, shown local with UTC kept in its title. */
function localize(time) {
  if (Number.isNaN(Date.parse(time.dateTime))) return;
  time.title = `${time.dateTime.replace('T', ' ').slice(0, 19)} UTC`;
  time.textContent = localTime(time.dateTime);
}

function timeElement(iso) {
  const time = document.createElement('time');
  time.dateTime = iso;
  localize(time);
  return time;
}

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function verdictCell(verdict) {
  const td = document.createElement('td');
  const span = document.createElement('span');
  span.className = `verdict verdict-${verdict}`;
  span.textContent = verdict;
  td.append(span);
  return td;
}

function row(d) {
  const tr = document.createElement('tr');
  tr.className = 'fresh';
  tr.dataset.at = d.at;
  tr.dataset.id = d.decisionId;
  const when = document.createElement('td');
  const link = document.createElement('a');
  link.href = `/console/decisions/${encodeURIComponent(d.decisionId)}`;
  link.append(timeElement(d.at));
  when.append(link);
  tr.append(
    when,
    verdictCell(d.verdict),
    cell(String(d.score), 'num'),
    cell(d.accountId ?? ''),
    cell(d.userId ?? ''),
    cell(d.ip ?? ''),
    cell(d.rules.join(', ')),
    cell(d.label ?? ''),
    cell(d.shadowVerdict ?? ''),
    cell(d.degraded ? 'degraded' : ''),
  );
  return tr;
}

function startTail(table, toggle, status) {
  let timer;
  const body = table.tBodies[0];
  const known = () => new Set([...body.rows].map((r) => r.dataset.id));
  const newestMs = () => {
    const first = body.rows[0];
    return first?.dataset.at ? Date.parse(first.dataset.at) : Date.now() - 60_000;
  };
  async function poll() {
    try {
      const url = new URL(table.dataset.tailUrl, window.location.href);
      url.searchParams.set('sinceMs', String(newestMs()));
      const answer = await fetch(url, { headers: { accept: 'application/json' } });
      if (answer.redirected || answer.status === 401) {
        status.textContent = 'Signed out: sign in again to follow.';
        stop();
        return;
      }
      if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
      const { decisions } = await answer.json();
      const seen = known();
      const fresh = decisions.filter((d) => !seen.has(d.decisionId));
      for (const d of fresh.reverse()) body.prepend(row(d));
      status.textContent = `Following: ${fresh.length} new at ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      status.textContent = `Live tail paused: ${error.message}`;
    }
  }
  function stop() {
    clearInterval(timer);
    timer = undefined;
    toggle.setAttribute('aria-pressed', 'false');
    toggle.textContent = 'Follow new decisions';
  }
  toggle.addEventListener('click', () => {
    if (timer !== undefined) {
      stop();
      status.textContent = 'Stopped.';
      return;
    }
    toggle.setAttribute('aria-pressed', 'true');
    toggle.textContent = 'Stop following';
    status.textContent = 'Following…';
    void poll();
    timer = setInterval(poll, POLL_MS);
  });
  toggle.hidden = false;
}

for (const time of document.querySelectorAll('time[datetime]')) localize(time);

const table = document.querySelector('table[data-tail-url]');
const toggle = document.getElementById('live-toggle');
const status = document.getElementById('live-status');
if (table && toggle && status) startTail(table, toggle, status);
