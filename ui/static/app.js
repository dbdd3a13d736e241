// The Local Models page: a client of modeld's public API, served by the
// daemon itself. Everything it shows comes from the API and is put in the
// page as text (textContent, attributes), never as HTML: model names and
// file names come from files on disk and from the hub.
'use strict';

const KEY = 'modeld.apiKey';
const $ = (id) => document.getElementById(id);

// el builds an element with properties, attributes (data-*, aria-*) and
// children (strings become text nodes).
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('data-') || k.startsWith('aria-') || k === 'title' || k === 'role') e.setAttribute(k, String(v));
    else e[k] = v;
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return e;
}

function bytes(n) {
  if (typeof n !== 'number' || !isFinite(n)) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

function since(iso) {
  const t = Date.parse(iso);
  if (!t) return '';
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function notice(text) {
  const n = $('notice');
  n.textContent = text || '';
  n.hidden = !text;
}

// modelPath is a model id as a path under /v1/models/ (ids hold '/').
const modelPath = (id) => id.split('/').map(encodeURIComponent).join('/');

class APIError extends Error {
  constructor(status, body) {
    const e = body && body.error;
    super((e && e.message) || `HTTP ${status}`);
    this.status = status;
    this.code = e && e.code;
  }
}

// api calls the daemon with the key, when one is kept; a 401 asks for the
// key once and retries.
async function api(method, path, body, opts = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = {};
    const key = sessionStorage.getItem(KEY);
    if (key) headers.Authorization = `Bearer ${key}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, {
      method, headers, signal: opts.signal, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status === 401 && attempt === 0 && await askKey()) continue;
    if (!res.ok) {
      let b = null;
      try { b = await res.json(); } catch { /* not JSON */ }
      throw new APIError(res.status, b);
    }
    return opts.raw ? res : res.json();
  }
}

function askKey() {
  const d = $('key-dialog');
  $('key-input').value = '';
  return new Promise((resolve) => {
    d.addEventListener('close', () => {
      const v = $('key-input').value.trim();
      if (d.returnValue === 'ok' && v) {
        sessionStorage.setItem(KEY, v);
        resolve(true);
      } else {
        resolve(false);
      }
    }, { once: true });
    d.showModal();
  });
}

function confirmDialog(text, okLabel) {
  const d = $('confirm-dialog');
  $('confirm-text').textContent = text;
  $('confirm-ok').textContent = okLabel;
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.returnValue = '';
    d.showModal();
  });
}

// lines yields the lines of a streamed response body as they arrive.
async function* lines(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      yield buf.slice(0, i).replace(/\r$/, '');
      buf = buf.slice(i + 1);
    }
  }
  buf += dec.decode();
  if (buf) yield buf;
}

// ---- state ----

const state = { models: [], loaded: new Map(), system: null };

async function refresh() {
  try {
    const [list, sys] = await Promise.all([api('GET', '/v1/models'), api('GET', '/v1/system')]);
    state.models = list.data || [];
    state.system = sys;
    state.loaded = new Map(((sys.loaded && sys.loaded.models) || []).map((m) => [m.id, m]));
    renderModels();
    renderDisk(list.disk_usage);
    renderProbe(sys);
    renderPlayModels();
    $('version').textContent = sys.version ? `modeld ${sys.version}` : '';
    notice('');
  } catch (e) {
    notice(`Cannot read the daemon's state: ${e.message}`);
  }
}

// ---- models ----

function loadedText(m) {
  const l = state.loaded.get(m.id);
  if (!l) return el('span', { className: 'muted' }, 'no');
  let where = l.device || 'cpu';
  if (l.device && l.device !== 'cpu') {
    const share = Math.round((l.gpu_share || 0) * 100);
    where = share >= 100 ? `${l.device} (100% GPU)` : `${l.device} (${share}% GPU / ${100 - share}% CPU)`;
  }
  const parts = [l.state === 'ready' ? where : `${l.state} · ${where}`];
  if (l.loaded_at) parts.push(`for ${since(l.loaded_at)}`);
  if (l.slots) parts.push(`${l.slots_in_use}/${l.slots} busy`);
  return el('span', { className: 'loaded', 'data-device': l.device || 'cpu' }, parts.join(' · '));
}

function renderModels() {
  const body = $('models').tBodies[0];
  body.replaceChildren(...state.models.map((m) => el('tr', { 'data-model': m.id },
    el('td', { className: 'mono id' }, m.id),
    el('td', { className: 'task' }, (m.tasks || [m.task]).filter(Boolean).join(', ') +
      ((m.input_modalities || []).includes('image') ? ' (reads images)' : '')),
    el('td', { className: 'format' }, m.format || ''),
    el('td', { className: 'quant' }, m.quantization || ''),
    el('td', { className: 'num size', 'data-bytes': m.size_bytes }, bytes(m.size_bytes)),
    el('td', { className: 'num own', 'data-bytes': m.unique_bytes }, bytes(m.unique_bytes)),
    el('td', { className: 'num shared', 'data-bytes': m.shared_bytes,
      title: (m.shared_with || []).length ? `shared with ${m.shared_with.join(', ')}` : undefined }, bytes(m.shared_bytes)),
    el('td', {}, loadedText(m)),
    el('td', {}, el('button', { type: 'button', className: 'danger delete', onclick: () => removeModel(m) }, 'Delete')),
  )));
  $('models-empty').hidden = state.models.length > 0;
}

async function removeModel(m) {
  const loaded = state.loaded.has(m.id);
  const what = `Delete ${m.id}? ${loaded ? 'It is unloaded first. ' : ''}This frees ${bytes(m.unique_bytes ?? m.size_bytes)} on disk.`;
  if (!await confirmDialog(what, 'Delete')) return;
  try {
    if (loaded) {
      try {
        await api('POST', '/v1/unload', { model: m.id, wait: true });
      } catch (e) {
        if (e.code !== 'model_not_loaded') throw e;
      }
    }
    await api('DELETE', `/v1/models/${modelPath(m.id)}`);
  } catch (e) {
    notice(`Deleting ${m.id} failed: ${e.message}`);
  }
  await refresh();
}

// ---- pull ----

function startPull(ref, name) {
  const ctl = new AbortController();
  const files = new Map();
  const status = el('span', { className: 'status muted' }, 'starting');
  const cancel = el('button', { type: 'button', className: 'secondary cancel', onclick: () => ctl.abort() }, 'Cancel');
  const list = el('div', { className: 'files' });
  const box = el('div', { className: 'pull', 'data-ref': ref, 'data-state': 'running' },
    el('div', { className: 'pull-head' }, el('span', { className: 'ref mono' }, ref), status, cancel), list);
  $('pulls').prepend(box);
  const finish = (st, text) => {
    box.dataset.state = st;
    status.textContent = text;
    cancel.disabled = true;
  };
  const fileRow = (name) => {
    let f = files.get(name);
    if (!f) {
      f = { bar: el('progress', { max: 1, value: 0 }), pct: el('span', { className: 'num pct' }, '0%') };
      const row = el('div', { className: 'file', 'data-file': name }, el('span', { className: 'mono name' }, name), f.bar, f.pct);
      f.row = row;
      files.set(name, f);
      list.append(row);
    }
    return f;
  };
  (async () => {
    try {
      const body = { model: ref };
      if (name) body.name = name;
      const res = await api('POST', '/v1/models/pull', body, { signal: ctl.signal, raw: true });
      for await (const line of lines(res)) {
        if (!line.trim()) continue;
        const ev = JSON.parse(line);
        if (ev.status === 'success') {
          finish('done', `pulled ${ev.model}`);
          await refresh();
          return;
        }
        if (ev.status === 'error') {
          finish('failed', `failed: ${(ev.error && ev.error.message) || 'unknown error'}`);
          return;
        }
        status.textContent = ev.status;
        if (ev.file) {
          const f = fileRow(ev.file);
          if (ev.total > 0) {
            f.bar.max = ev.total;
            f.bar.value = Math.min(ev.completed || 0, ev.total);
            f.pct.textContent = `${Math.floor((100 * f.bar.value) / ev.total)}%`;
          }
          f.row.dataset.status = ev.status;
        }
      }
      finish('failed', 'the stream ended without a result');
    } catch (e) {
      if (ctl.signal.aborted) finish('cancelled', 'cancelled');
      else finish('failed', `failed: ${e.message}`);
    }
  })();
}

// ---- disk and probe ----

function renderDisk(u) {
  const dl = $('disk');
  if (!u) {
    dl.replaceChildren(el('dt', {}, 'unknown'), el('dd', {}, ''));
    return;
  }
  const sum = (xs) => (xs || []).reduce((a, x) => a + (x.size || 0), 0);
  const rows = [
    ['Total', u.total, 'total'], ['Model files', u.blobs, 'blobs'], ['Manifests', u.manifests, 'manifests'],
    ['Partial downloads', sum(u.partials), 'partials'], ['Orphaned blobs', sum(u.orphans), 'orphans'], ['Other', sum(u.other), 'other'],
  ];
  dl.replaceChildren(...rows.flatMap(([k, v, key]) => [el('dt', {}, k), el('dd', { 'data-key': key, 'data-bytes': v }, bytes(v))]));
}

function renderProbe(sys) {
  const p = sys.probe || {};
  const cpu = p.cpu || {};
  const mem = p.memory || {};
  $('probe-cpu').textContent = [cpu.model, cpu.threads && `${cpu.threads} threads`, mem.total_bytes && `${bytes(mem.total_bytes)} RAM`]
    .filter(Boolean).join(' · ');
  const gpus = p.gpus || [];
  $('probe-gpus').replaceChildren(...(gpus.length ? gpus.map((g) => el('li', { 'data-gpu': `${g.kind}:${g.index}` },
    `${g.kind}:${g.index} ${g.name || ''} · ${bytes(g.total_bytes)}${g.free_bytes ? ` (${bytes(g.free_bytes)} free)` : ''}`))
    : [el('li', { className: 'muted' }, 'no GPU found')]));
  $('probe-backends').tBodies[0].replaceChildren(...(p.backends || []).map((b) => el('tr', { 'data-backend': b.kind },
    el('td', { className: 'mono' }, b.kind),
    el('td', { className: b.usable ? 'yes usable' : 'no usable' }, b.usable ? 'yes' : 'no'),
    el('td', { className: 'num' }, String(b.devices || 0)),
    el('td', { className: 'reason' }, b.reason || ''),
  )));
  $('probe-libraries').tBodies[0].replaceChildren(...(sys.libraries || []).map((l) => el('tr', { 'data-library': l.name },
    el('td', { className: 'mono' }, l.name),
    el('td', { className: l.installed ? 'yes' : 'no' }, l.installed ? 'yes' : 'no'),
    el('td', {}, l.version || ''),
    el('td', { className: 'mono' }, l.fix || ''),
  )));
}

// ---- playground ----

const play = { history: [], ctl: null };

function taskOf(id) {
  const m = state.models.find((x) => x.id === id);
  const tasks = (m && (m.tasks || [m.task])) || [];
  if (tasks.includes('chat')) return 'chat';
  if (tasks.includes('embed')) return 'embed';
  if (tasks.includes('classify')) return 'classify';
  return tasks[0] || '';
}

function renderPlayModels() {
  const sel = $('play-model');
  const keep = sel.value;
  const usable = state.models.filter((m) => ['chat', 'embed', 'classify'].includes(taskOf(m.id)));
  sel.replaceChildren(...usable.map((m) => el('option', { value: m.id }, m.id)));
  if (usable.some((m) => m.id === keep)) sel.value = keep;
  $('play-task').textContent = taskOf(sel.value);
}

function say(who, text) {
  const body = el('span', { className: 'text' }, text);
  const box = el('div', { className: `msg ${who}`, 'data-role': who }, el('span', { className: 'who' }, who), body);
  $('play-output').append(box);
  return body;
}

async function send() {
  const model = $('play-model').value;
  const text = $('play-input').value;
  if (!model || !text.trim()) return;
  const task = taskOf(model);
  $('play-input').value = '';
  play.ctl = new AbortController();
  $('play-send').disabled = true;
  $('play-stop').disabled = false;
  const status = $('play-status');
  status.textContent = 'working';
  try {
    if (task === 'chat') await chat(model, text, play.ctl.signal);
    else if (task === 'embed') await embed(model, text, play.ctl.signal);
    else await classify(model, text, play.ctl.signal);
  } catch (e) {
    status.textContent = play.ctl.signal.aborted ? 'stopped' : `failed: ${e.message}`;
  } finally {
    $('play-send').disabled = false;
    $('play-stop').disabled = true;
    play.ctl = null;
    refresh(); // the model is loaded now
  }
}

async function chat(model, text, signal) {
  play.history.push({ role: 'user', content: text });
  say('user', text);
  const out = say('assistant', '');
  const status = $('play-status');
  let answer = '';
  let thinking = null; // the model's reasoning, shown apart from its answer
  try {
    const req = { model, messages: play.history, stream: true, stream_options: { include_usage: true } };
    const temp = $('play-temp').value.trim();
    if (temp !== '') req.temperature = Number(temp);
    const res = await api('POST', '/v1/chat/completions', req, { signal, raw: true });
    status.textContent = 'streaming';
    let finish = '';
    let usage = null;
    for await (const line of lines(res)) {
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '[DONE]') break;
      const ev = JSON.parse(data);
      if (ev.error) throw new Error(ev.error.message);
      const c = ev.choices && ev.choices[0];
      if (c && c.delta && c.delta.reasoning_content) {
        if (!thinking) {
          thinking = el('span', { className: 'reasoning' });
          out.before(thinking);
        }
        thinking.textContent += c.delta.reasoning_content;
      }
      if (c && c.delta && c.delta.content) {
        answer += c.delta.content;
        out.textContent = answer;
        out.parentElement.dataset.tokens = String(Number(out.parentElement.dataset.tokens || 0) + 1);
      }
      if (c && c.finish_reason) finish = c.finish_reason;
      if (ev.usage) usage = ev.usage;
    }
    status.textContent = `done (${finish || 'end'}${usage ? `, ${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion tokens` : ''})`;
  } finally {
    play.history.push({ role: 'assistant', content: answer });
    if (signal.aborted) out.parentElement.dataset.stopped = 'true';
  }
}

async function embed(model, text, signal) {
  say('user', text);
  const r = await api('POST', '/v1/embeddings', { model, input: text }, { signal });
  const v = (r.data && r.data[0] && r.data[0].embedding) || [];
  const head = v.slice(0, 8).map((x) => x.toFixed(4)).join(', ');
  const out = say('embedding', `${v.length} dimensions: [${head}${v.length > 8 ? ', …' : ''}]`);
  out.parentElement.dataset.dimensions = String(v.length);
  $('play-status').textContent = 'done';
}

async function classify(model, text, signal) {
  say('user', text);
  const r = await api('POST', '/v1/classify', { model, input: text }, { signal });
  const labels = (r.data && r.data[0] && r.data[0].labels) || [];
  const out = say('labels', labels.map((l) => `${l.label}: ${l.score.toFixed(3)}`).join('\n'));
  out.parentElement.dataset.labels = String(labels.length);
  $('play-status').textContent = 'done';
}

// ---- wiring ----

document.addEventListener('DOMContentLoaded', () => {
  $('refresh').addEventListener('click', refresh);
  $('key-button').addEventListener('click', async () => { if (await askKey()) refresh(); });
  $('pull-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const ref = $('pull-ref').value.trim();
    if (ref) startPull(ref, $('pull-name').value.trim());
  });
  $('play-form').addEventListener('submit', (ev) => { ev.preventDefault(); send(); });
  $('play-stop').addEventListener('click', () => { if (play.ctl) play.ctl.abort(); });
  $('play-clear').addEventListener('click', () => { play.history = []; $('play-output').replaceChildren(); $('play-status').textContent = ''; });
  $('play-model').addEventListener('change', () => {
    play.history = [];
    $('play-task').textContent = taskOf($('play-model').value);
  });
  refresh();
  setInterval(() => { if (!document.hidden) refresh(); }, 5000);
});
