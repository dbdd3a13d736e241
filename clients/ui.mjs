// Drives the Local Models page (GET /) in Debian's chromium through
// playwright-core against a running daemon (cmd/modeld/ui_e2e_test.go):
// the models and their sizes are listed, a delete removes one, a pull from
// the fake hub fills its bar and the model appears, another pull is
// cancelled, a chat streams and Stop ends it, embed and classify answer,
// and the probe panel shows the backends. With KEY_URL and KEY it also
// opens the page of a daemon that has an API key: the page asks for it.
// Prints one JSON object of what it saw; exits non-zero on a failed check.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.MODELD_URL;
const shots = process.env.SCREENSHOT_DIR;
const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const CHAT = env('CHAT_MODEL');
const EMBED = env('EMBED_MODEL');
const CLASSIFY = env('CLASSIFY_MODEL');
const DELETE = env('DELETE_MODEL');
const PULL = env('PULL_REF');
const PULLED = env('PULLED_MODEL');
const SLOW = env('SLOW_REF');

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const profile = mkdtempSync(join(tmpdir(), 'modeld-ui-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 1000 },
});
const out = { screenshots: [] };
const problems = [];
try {
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  const shot = async (name) => {
    if (!shots) return;
    const path = join(shots, `${name}.png`);
    await page.screenshot({ path, fullPage: true });
    out.screenshots.push(path);
  };
  const row = (id) => page.locator(`#models tbody tr[data-model="${id}"]`);

  const res = await page.goto(`${base}/`);
  out.csp = res.headers()['content-security-policy'];
  await row(CHAT).waitFor();

  // The models and their sizes, as the API lists them.
  const api = await (await page.request.get(`${base}/v1/models`)).json();
  out.models = [];
  for (const m of api.data) {
    const r = row(m.id);
    const shown = {
      id: m.id,
      task: await r.locator('.task').textContent(),
      format: await r.locator('.format').textContent(),
      size: await r.locator('.size').textContent(),
      sizeBytes: Number(await r.locator('.size').getAttribute('data-bytes')),
      own: await r.locator('.own').textContent(),
      shared: await r.locator('.shared').textContent(),
    };
    check(shown.sizeBytes === m.size_bytes && /\d/.test(shown.size), `${m.id}'s size shown as ${shown.size} (${shown.sizeBytes}), the API says ${m.size_bytes}`);
    check(shown.format === m.format && shown.task.includes(m.task), `${m.id}'s task and format`);
    out.models.push(shown);
  }
  out.diskTotal = Number(await page.locator('#disk dd[data-key="total"]').getAttribute('data-bytes'));
  check(out.diskTotal === api.disk_usage.total, `disk total ${out.diskTotal}, the API says ${api.disk_usage.total}`);

  // The probe panel: every backend with whether it is usable and why not.
  await page.locator('#probe-backends tbody tr').first().waitFor();
  out.backends = await page.locator('#probe-backends tbody tr').evaluateAll((rows) => rows.map((r) => ({
    kind: r.dataset.backend, usable: r.querySelector('.usable').textContent, reason: r.querySelector('.reason').textContent,
  })));
  await shot('models');

  // Delete, with the confirmation.
  await row(DELETE).locator('button.delete').click();
  await page.locator('#confirm-dialog[open]').waitFor();
  out.confirmText = await page.locator('#confirm-text').textContent();
  await page.locator('#confirm-ok').click();
  await row(DELETE).waitFor({ state: 'detached' });
  out.deleted = DELETE;

  // A pull from the fake hub: its bar reaches 100% and the model appears.
  await page.fill('#pull-ref', PULL);
  await page.click('#pull-start');
  const pull = page.locator(`.pull[data-ref="${PULL}"]`);
  await pull.waitFor();
  await page.waitForFunction((ref) => document.querySelector(`.pull[data-ref="${ref}"]`).dataset.state !== 'running', PULL);
  out.pullStatus = await pull.locator('.status').textContent();
  check(await pull.getAttribute('data-state') === 'done', `pull ended: ${out.pullStatus}`);
  out.pullFiles = await pull.locator('.file').evaluateAll((rows) => rows.map((r) => {
    const bar = r.querySelector('progress');
    return { file: r.dataset.file, value: bar.value, max: bar.max, pct: r.querySelector('.pct').textContent };
  }));
  check(out.pullFiles.length > 0 && out.pullFiles.every((f) => f.value === f.max && f.pct === '100%'), `pull bars ${JSON.stringify(out.pullFiles)}`);
  out.pulled = out.pullStatus.replace(/^pulled /, '');
  check(out.pulled.startsWith(PULLED), `pulled ${out.pulled}, want ${PULLED}…`);
  await row(out.pulled).waitFor();
  await shot('pulled');

  // A pull that the fake hub serves slowly, cancelled half way.
  await page.fill('#pull-ref', SLOW);
  await page.click('#pull-start');
  const slow = page.locator(`.pull[data-ref="${SLOW}"]`);
  await slow.locator('.file progress').waitFor();
  await page.waitForFunction((ref) => {
    const bar = document.querySelector(`.pull[data-ref="${ref}"] .file progress`);
    return bar && bar.value > 0;
  }, SLOW);
  out.slowBefore = await slow.locator('.pct').first().textContent();
  await slow.locator('button.cancel').click();
  await page.locator(`.pull[data-ref="${SLOW}"][data-state="cancelled"]`).waitFor();
  await shot('pull-cancelled');

  // Chat: streamed, then stopped.
  await page.selectOption('#play-model', CHAT);
  await page.fill('#play-temp', '0');
  await page.fill('#play-input', 'Tell me a long story.');
  await page.click('#play-send');
  await page.waitForFunction(() => {
    const m = document.querySelector('.msg[data-role="assistant"]');
    return m && Number(m.dataset.tokens || 0) >= 5;
  });
  out.streamedBeforeStop = Number(await page.locator('.msg[data-role="assistant"]').getAttribute('data-tokens'));
  await page.click('#play-stop');
  await page.waitForFunction(() => document.getElementById('play-status').textContent === 'stopped');
  out.chatStatus = await page.locator('#play-status').textContent();
  out.chatText = await page.locator('.msg[data-role="assistant"] .text').textContent();
  check(out.chatText.length > 0, 'the chat streamed no text');
  await shot('chat-stopped');

  // Embed and classify.
  await page.click('#play-clear');
  await page.selectOption('#play-model', EMBED);
  await page.fill('#play-input', 'a sentence to embed');
  await page.click('#play-send');
  await page.locator('.msg[data-role="embedding"]').waitFor();
  out.dimensions = Number(await page.locator('.msg[data-role="embedding"]').getAttribute('data-dimensions'));
  await page.selectOption('#play-model', CLASSIFY);
  await page.fill('#play-input', 'I love this');
  await page.click('#play-send');
  await page.locator('.msg[data-role="labels"]').waitFor();
  out.labels = Number(await page.locator('.msg[data-role="labels"]').getAttribute('data-labels'));
  await page.click('#refresh');
  await row(CHAT).locator('.loaded').waitFor();
  out.loaded = await page.locator('#models tbody tr').evaluateAll((rows) => rows
    .filter((r) => r.querySelector('.loaded'))
    .map((r) => `${r.dataset.model}: ${r.querySelector('.loaded').textContent}`));
  await shot('playground');

  // A daemon with an API key: the page asks for it and keeps it for the tab.
  if (process.env.KEY_URL) {
    const p2 = await context.newPage();
    p2.on('pageerror', (e) => problems.push(`page error (key): ${e.message}`));
    await p2.goto(`${process.env.KEY_URL}/`);
    await p2.locator('#key-dialog[open]').waitFor();
    await p2.fill('#key-input', env('KEY'));
    await p2.click('#key-ok');
    await p2.locator('#models tbody tr').first().waitFor();
    out.keyModels = await p2.locator('#models tbody tr').count();
    out.keyStored = await p2.evaluate(() => sessionStorage.getItem('modeld.apiKey') !== null);
    const gpuRow = p2.locator(`#models tbody tr[data-model="${env('GPU_MODEL')}"] .loaded`);
    await gpuRow.waitFor();
    out.keyLoaded = await gpuRow.textContent();
    out.keyGPUs = await p2.locator('#probe-gpus li[data-gpu]').allTextContents();
    out.keyVulkan = await p2.locator('#probe-backends tr[data-backend="vulkan"] .usable').textContent();
    if (shots) {
      const path = join(shots, 'api-key.png');
      await p2.screenshot({ path, fullPage: true });
      out.screenshots.push(path);
    }
  }
  check(problems.length === 0, `the page reported errors: ${problems.join('; ')}`);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
