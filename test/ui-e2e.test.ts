// The web UI end to end: a real `spindle serve` (the built CLI) on a tiny fixture model, driven in headless
// Chromium (Debian's `chromium`, through playwright-core). Streams a reply, stops one mid-answer (Esc), puts the
// settings into the request, finds a conversation after a reload, refuses images for a text model as they are
// attached (file picker, drop, paste) and sends them for a vision one, shows a server error as a readable message,
// renders a hostile Markdown reply inert, shows a reasoning model's thinking folded above its answer, shows the
// server panel, asks for the API key of a --api-key server, loads in under a second, and ships under 500 kB gzipped. Needs `npm run build:ts` and `npm run build:ui`.
// Screenshots go to $SPINDLE_UI_SCREENSHOTS when set (docs/images to refresh the README's), else a temp folder.
import t from 'tap';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page, type Request } from 'playwright-core';
import { normalizeEngineOptions } from '../lib/engine-options.js';
import { localKey, ModelStore } from '../lib/models/store.js';
import { buildApp } from '../lib/server/app.js';
import { fixtureModel } from './helpers/fixtures.js';
import { tokenizerGguf } from '../lib/random-model/tokenizer.js';
import { chain, writeScriptedModel } from './tooling/fixtures/index.js';
import { startHubServer } from './helpers/hub-server.js';
import { repoRoot, startServe, type ServeProcess } from './helpers/serve-process.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(existsSync);
const UI_DIR = join(repoRoot, 'dist', 'ui');
const SHOTS = process.env.SPINDLE_UI_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), 'spindle-ui-'));
if (!process.env.SPINDLE_UI_SCREENSHOTS) t.teardown(() => rmSync(SHOTS, { recursive: true, force: true }));
const MODEL = 'tiny-qwen3';
const CONTEXT = 4096;

if (!CHROMIUM && !process.env.CI) {
  t.plan(0, 'no chromium (apt-get install chromium); .ci/run installs it');
  process.exit(0);
}

const path = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
const server = await startServe([path, '--max-model-len', String(CONTEXT), '--threads', '1', '--served-model-name', MODEL]);
t.teardown(() => server.stop());
const browser: Browser = await chromium.launch({
  executablePath: CHROMIUM, headless: true,
  args: ['--no-sandbox', '--disable-background-networking', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run'],
});
t.teardown(() => browser.close());

async function newPage(url = server.url, options: { colorScheme?: 'light' | 'dark'; viewport?: { width: number; height: number } } = {}): Promise<Page> {
  const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 800 }, colorScheme: options.colorScheme ?? 'light' });
  const page = await context.newPage();
  await page.goto(url + '/');
  await page.getByRole('textbox', { name: 'Message' }).waitFor();
  // the served model's card is in (what the composer knows about images comes from it: a CI run attached an
  // image before the card arrived, when whether the model takes images is still unknown)
  if (url === server.url) await page.getByRole('combobox', { name: 'Model' }).locator('option', { hasText: MODEL }).waitFor({ state: 'attached' });
  return page;
}

const chatRequests = (page: Page): Array<Record<string, unknown>> => {
  const bodies: Array<Record<string, unknown>> = [];
  page.on('request', (r: Request) => {
    if (r.url().endsWith('/v1/chat/completions') && r.method() === 'POST') bodies.push(r.postDataJSON() as Record<string, unknown>);
  });
  return bodies;
};

async function setSetting(page: Page, label: string, value: string): Promise<void> {
  const input = page.getByRole('spinbutton', { name: label });
  await input.fill(value);
  await input.press('Tab'); // change fires on blur
}

/** The sum of a metric's samples (those with `label`, when given). */
async function metric(name: string, label = ''): Promise<number> {
  const text = await (await fetch(server.url + '/metrics')).text();
  return text.split('\n').filter((l) => (l.startsWith(name + '{') || l.startsWith(name + ' ')) && l.includes(label))
    .reduce((sum, l) => sum + Number(l.split(/\s+/).at(-1)), 0);
}

const lastReply = (page: Page) => page.locator('article.message.assistant').last();

t.test('the page loads in under 1 s and the shipped assets are under 500 kB gzipped', async (t) => {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const n of readdirSync(dir)) statSync(join(dir, n)).isDirectory() ? walk(join(dir, n)) : files.push(join(dir, n));
  };
  walk(UI_DIR);
  const gz = files.reduce((sum, f) => sum + gzipSync(readFileSync(f)).length, 0);
  t.ok(gz < 500 * 1024, `dist/ui is ${(gz / 1024).toFixed(1)} kB gzipped (limit 500 kB)`);
  const context = await browser.newContext();
  const page = await context.newPage();
  const start = Date.now();
  await page.goto(server.url + '/');
  await page.getByRole('textbox', { name: 'Message' }).waitFor();
  await page.getByRole('combobox', { name: 'Model' }).locator('option', { hasText: MODEL }).waitFor({ state: 'attached' });
  const ms = Date.now() - start;
  const nav = await page.evaluate(() => (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).loadEventEnd);
  t.ok(nav < 1000, `the page loads (load event) in ${nav.toFixed(0)} ms`);
  t.ok(ms < 3000, `usable (models listed) ${ms} ms after navigation starts`);
  t.comment(`ui: ${(gz / 1024).toFixed(1)} kB gzipped; usable in ${ms} ms; load event ${nav.toFixed(0)} ms`);
  await context.close();
});

t.test('send a message and watch it stream, with token counts and tokens/s under the reply', async (t) => {
  const page = await newPage();
  const bodies = chatRequests(page);
  await setSetting(await openSettings(page), 'Max tokens', '200');
  // Records the reply's text length at every change of the page while the reply is marked busy (streaming).
  await page.evaluate(() => {
    const w = window as unknown as { __lengths: number[] };
    w.__lengths = [];
    new MutationObserver(() => {
      const reply = document.querySelector('article.message.assistant[aria-busy="true"] .markdown');
      const n = reply?.textContent?.length ?? 0;
      if (n > 0 && w.__lengths.at(-1) !== n) w.__lengths.push(n);
    }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
  });
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Tell me about spindles.');
  await box.press('Enter');
  const reply = lastReply(page);
  const stats = await reply.getByTestId('reply-stats').textContent();
  t.match(stats, /^\d+ prompt tokens · \d+ tokens · [\d.]+ tokens\/s/, `stats: ${stats}`);
  const lengths = await page.evaluate(() => (window as unknown as { __lengths: number[] }).__lengths);
  const final = ((await reply.locator('.markdown').textContent()) ?? '').length;
  t.ok(lengths.length >= 3, `the text grew in ${lengths.length} steps while streaming (${lengths.slice(0, 8).join(', ')}, ... of ${final})`);
  t.ok(lengths.every((n) => n <= final), 'each step a prefix length of the final text');
  t.equal(bodies.length, 1);
  t.equal(bodies[0].stream, true, 'streamed request');
  t.same(bodies[0].messages, [{ role: 'user', content: 'Tell me about spindles.' }]);
  await page.context().close();
});

async function openSettings(page: Page): Promise<Page> {
  if (!(await page.getByRole('complementary', { name: 'Settings' }).isVisible())) await page.getByRole('button', { name: 'Settings' }).click();
  return page;
}

t.test('temperature and max tokens from the settings panel are in the request', async (t) => {
  const page = await newPage();
  const bodies = chatRequests(page);
  await openSettings(page);
  await setSetting(page, 'Temperature', '0.35');
  await setSetting(page, 'Max tokens', '7');
  await setSetting(page, 'Top-k', '20');
  await page.getByRole('textbox', { name: 'Seed' }).fill('1234');
  await page.getByRole('textbox', { name: 'System prompt' }).fill('Be brief.');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Hello');
  await box.press('Enter');
  await lastReply(page).getByTestId('reply-stats').waitFor();
  t.equal(bodies.length, 1);
  t.match(bodies[0], { temperature: 0.35, max_tokens: 7, top_k: 20, seed: 1234, model: MODEL });
  // the panel's "off" values are sent too, so a model's recommended sampling (server defaults) never mixes in
  t.match(bodies[0], { top_p: 1, min_p: 0, repetition_penalty: 1 });
  t.same(bodies[0].messages, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }]);
  const stats = await lastReply(page).getByTestId('reply-stats').textContent();
  const tokens = Number(/(\d+) tokens(?! ·)|· (\d+) tokens/.exec(stats ?? '')?.slice(1).find(Boolean));
  t.ok(tokens <= 7, `at most 7 tokens (${stats})`);
  await page.context().close();
});

t.test('Esc stops a reply mid-answer; the server aborts it', async (t) => {
  const page = await newPage();
  await openSettings(page);
  await setSetting(page, 'Max tokens', String(CONTEXT - 64));
  await setSetting(page, 'Temperature', '1');
  const aborted = await metric('spindle:request_success_total', 'finished_reason="abort"');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Write a very long story.');
  await box.press('Enter');
  await page.waitForFunction(() => (document.querySelector('article.message.assistant:last-of-type .markdown')?.textContent ?? '').length > 20);
  t.ok(await page.getByRole('button', { name: 'Stop' }).isVisible(), 'a Stop button while streaming');
  await page.keyboard.press('Escape');
  const stats = await lastReply(page).getByTestId('reply-stats').textContent();
  t.match(stats, /stopped after ~\d+ tokens/);
  const n = Number(/~(\d+)/.exec(stats ?? '')![1]);
  t.ok(n < CONTEXT - 64, `stopped before max tokens (${n})`);
  t.ok(await page.getByRole('button', { name: 'Send' }).isVisible(), 'Send is back');
  for (let i = 0; i < 100 && (await metric('spindle:num_requests_running')) > 0; i++) await new Promise((r) => setTimeout(r, 50));
  t.equal(await metric('spindle:num_requests_running'), 0, 'no request left running on the server');
  t.equal(await metric('spindle:request_success_total', 'finished_reason="abort"'), aborted + 1, 'the server counted one aborted request');
  await page.context().close();
});

t.test('a reload finds the conversation (IndexedDB)', async (t) => {
  const page = await newPage();
  await openSettings(page);
  await setSetting(page, 'Max tokens', '5');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Remember the amber spindle');
  await box.press('Enter');
  await lastReply(page).getByTestId('reply-stats').waitFor();
  const replyText = await lastReply(page).locator('.markdown').textContent();
  await page.getByRole('button', { name: 'New chat' }).click();
  await page.reload();
  await page.getByRole('textbox', { name: 'Message' }).waitFor();
  const item = page.getByRole('navigation', { name: 'Conversations' }).getByRole('button', { name: 'Remember the amber spindle', exact: true });
  await item.waitFor();
  await item.click();
  t.equal(await page.locator('article.message.user .user-text').first().textContent(), 'Remember the amber spindle');
  t.equal(await lastReply(page).locator('.markdown').textContent(), replyText, 'the reply as it was');
  await page.context().close();
});

t.test('edit and resend replaces the turn; regenerate asks again with the same messages', async (t) => {
  const page = await newPage();
  const bodies = chatRequests(page);
  await openSettings(page);
  await setSetting(page, 'Max tokens', '4');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('first wording');
  await box.press('Enter');
  await lastReply(page).getByTestId('reply-stats').waitFor();
  await page.locator('article.message.user').getByRole('button', { name: 'Edit' }).click();
  await page.getByRole('textbox', { name: 'Edit message' }).fill('second wording');
  await page.getByRole('button', { name: 'Save and resend' }).click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="reply-stats"]').length === 1 && !document.querySelector('[aria-busy="true"]'));
  t.equal(await page.locator('article.message').count(), 2, 'one user message and one reply');
  t.equal(await page.locator('article.message.user .user-text').textContent(), 'second wording');
  await lastReply(page).getByRole('button', { name: 'Regenerate' }).click();
  await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]') && document.querySelectorAll('[data-testid="reply-stats"]').length === 1);
  t.equal(bodies.length, 3);
  t.same(bodies[1].messages, [{ role: 'user', content: 'second wording' }], 'the edited text was sent');
  t.same(bodies[2].messages, bodies[1].messages, 'regenerate sends the same messages');
  t.equal(await page.locator('article.message').count(), 2, 'the reply was replaced');
  await page.context().close();
});

// a 1x1 PNG
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

/** Drops (on the message box's form) or pastes (into the text box) the PNG as a file, as a browser delivers it. */
async function dropOrPaste(page: Page, how: 'drop' | 'paste', name: string): Promise<void> {
  await page.evaluate(({ b64, how, name }) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], name, { type: 'image/png' }));
    if (how === 'drop') {
      document.querySelector('form.composer')!.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    } else {
      document.querySelector('textarea[aria-label="Message"]')!.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
    }
  }, { b64: PNG.toString('base64'), how, name });
}

t.test('images for a model without a vision projector are refused at once (picker, drop, paste), nothing sent', async (t) => {
  const page = await newPage();
  const bodies = chatRequests(page);
  const notice = page.getByRole('status');
  await page.locator('input[type="file"]').setInputFiles({ name: 'dot.png', mimeType: 'image/png', buffer: PNG });
  await notice.filter({ hasText: 'dot.png' }).waitFor();
  t.match((await notice.textContent()) ?? '', /dot\.png not attached: tiny-qwen3 takes no images.*vision projector/, 'file picker: the reason is shown');
  for (const how of ['drop', 'paste'] as const) {
    await dropOrPaste(page, how, `${how}.png`);
    await notice.filter({ hasText: `${how}.png` }).waitFor();
    t.match((await notice.textContent()) ?? '', /takes no images/, `${how}: the reason is shown`);
  }
  t.equal(await page.getByRole('img', { name: /to send/ }).count(), 0, 'no image is attached');
  t.equal(bodies.length, 0, 'nothing went to the server');
  await page.context().close();
});

t.test('with a vision model, images come by picker, drop and paste and go as image_url parts', async (t) => {
  // the served fixture is a text model; its card is made to say 'vision' so the app sends images, and the
  // server's refusal (no projector loaded) shows as the reply's error
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.route('**/v1/models', async (route) => {
    const response = await route.fetch();
    const list = (await response.json()) as { data: Array<{ capabilities: string[] }> };
    for (const card of list.data) card.capabilities = ['completion', 'vision'];
    await route.fulfill({ response, json: list });
  });
  await page.goto(server.url + '/');
  const bodies = chatRequests(page);
  await page.locator('input[type="file"]').setInputFiles({ name: 'dot.png', mimeType: 'image/png', buffer: PNG });
  await page.getByRole('img', { name: 'image 1 to send' }).waitFor();
  await dropOrPaste(page, 'drop', 'drop.png');
  await page.getByRole('img', { name: 'image 2 to send' }).waitFor();
  await dropOrPaste(page, 'paste', 'paste.png');
  await page.getByRole('img', { name: 'image 3 to send' }).waitFor();
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('What is in these pictures?');
  await box.press('Enter');
  const error = lastReply(page).getByRole('alert');
  await error.waitFor();
  t.match((await error.textContent()) ?? '', /image/i, 'the server refused the images readably');
  const content = (bodies[0].messages as Array<{ content: unknown }>)[0].content as Array<{ type: string; image_url?: { url: string } }>;
  t.same(content.map((p) => p.type), ['image_url', 'image_url', 'image_url', 'text'], 'three image_url parts, then the text');
  t.ok(content.slice(0, 3).every((p) => /^data:image\/png;base64,/.test(p.image_url?.url ?? '')));
  t.ok(await page.getByRole('img', { name: 'attached image 3' }).isVisible(), 'the images show in the conversation');
  await context.close();
});

t.test("a reasoning model's thinking shows above the answer, folded once the answer came", async (t) => {
  // the scripted model answers `<think>Reasoning.</think>\n\nHello world!` (test/tooling/fixtures/scripted.ts)
  const dir = mkdtempSync(join(tmpdir(), 'spindle-ui-reasoning-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const vocab = tokenizerGguf('qwen3');
  const ids = ['<think>', 'Reason', 'ing', '.', '</think>', 'ĊĊ', 'Hello', 'Ġworld', '!', '<|im_end|>'].map((p) => vocab.tokens.indexOf(p));
  const scripted = await writeScriptedModel(join(dir, 'scripted.gguf'), chain(vocab.tokens.indexOf('Ċ'), ids));
  const reasoningServer = await startServe([scripted, '--max-model-len', '512', '--threads', '1', '--served-model-name', 'scripted']);
  t.teardown(() => reasoningServer.stop());
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.goto(reasoningServer.url + '/');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Say hello.');
  await box.press('Enter');
  const reply = lastReply(page);
  await reply.getByTestId('reply-stats').waitFor();
  t.equal((await reply.locator('.markdown').textContent())?.trim(), 'Hello world!', 'the answer, without the think block');
  const thought = reply.locator('details.reasoning');
  t.equal(await thought.locator('summary').textContent(), 'Thought');
  t.equal(await thought.evaluate((d) => (d as HTMLDetailsElement).open), false, 'folded');
  t.equal(await thought.locator('.reasoning-text').textContent(), 'Reasoning.');
  await thought.locator('summary').click();
  t.ok(await thought.locator('.reasoning-text').isVisible(), 'opens on a click');
  await context.close();
});

t.test('a server error is shown as a readable message', async (t) => {
  const page = await newPage();
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('spindle '.repeat(CONTEXT + 200));
  await box.press('Enter');
  const error = lastReply(page).getByRole('alert');
  await error.waitFor();
  const text = (await error.textContent()) ?? '';
  t.match(text, /\d+/, `message: ${text}`);
  t.notMatch(text, /^\s*[{[]/, 'not raw JSON');
  t.match(text, /context|max_model_len|maximum|too long|prompt/i, 'says what was wrong');
  await page.context().close();
});

t.test('a Markdown reply with a <script> tag or an onerror attribute renders inert', async (t) => {
  const page = await newPage();
  const bodies = chatRequests(page);
  const markdown = '# Title\n\nHello <script>window.__pwned = 1</script> and <img src="x:" onerror="window.__pwned = 2"> ' +
    '<a href="javascript:window.__pwned=3">link</a>\n\n```python\ndef f():\n    return 1\n```\n';
  const chunks = [markdown.slice(0, 40), markdown.slice(40)].map((content) => ({ choices: [{ index: 0, delta: { content }, finish_reason: null }] }));
  const sse = [...chunks, { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }, { choices: [], usage: { prompt_tokens: 3, completion_tokens: 9 } }]
    .map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n';
  await page.route('**/v1/chat/completions', (route) => route.fulfill({ status: 200, contentType: 'text/event-stream', body: sse }));
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('show me');
  await box.press('Enter');
  await lastReply(page).getByTestId('reply-stats').waitFor();
  const md = lastReply(page).locator('.markdown');
  t.equal(await md.locator('h1').textContent(), 'Title', 'Markdown rendered');
  t.equal(await md.locator('script').count(), 0, 'no script element');
  t.equal(await md.locator('[onerror]').count(), 0, 'no onerror attribute');
  t.equal(await md.locator('a[href^="javascript:"]').count(), 0, 'no javascript: link');
  t.ok(await md.locator('pre code .hljs-keyword').count() > 0, 'code highlighted');
  t.equal(await md.getByRole('button', { name: 'Copy' }).count(), 1, 'a copy button on the code block');
  await page.waitForTimeout(100);
  t.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined, 'nothing ran');
  t.notOk('max_tokens' in (bodies[0] ?? {}), 'default settings send no max_tokens: a reply may use the rest of the context');
  await page.context().close();
});

t.test('the server panel shows the model facts, snippets and live engine status (screenshots light and dark)', async (t) => {
  for (const scheme of ['light', 'dark'] as const) {
    const page = await newPage(server.url, { colorScheme: scheme });
    t.equal(await page.evaluate(() => document.documentElement.dataset.theme), scheme, `${scheme} theme from the system`);
    await openSettings(page);
    await setSetting(page, 'Max tokens', '40');
    await page.getByRole('button', { name: 'Close settings' }).click();
    const box = page.getByRole('textbox', { name: 'Message' });
    await box.fill('Show me a code block.');
    await box.press('Enter');
    await lastReply(page).getByTestId('reply-stats').waitFor();
    await page.screenshot({ path: join(SHOTS, `ui-chat-${scheme}.png`) });
    await page.getByRole('tab', { name: 'Server' }).click();
    const card = page.locator(`.model-card[data-model="${MODEL}"]`);
    await card.locator('[data-fact="architecture"]', { hasText: 'qwen3' }).waitFor();
    t.equal(await card.locator('[data-fact="quantization"]').textContent(), 'F32');
    t.equal(await card.locator('[data-fact="context"]').textContent(), `${CONTEXT} tokens`);
    t.equal(await page.getByTestId('server-url').textContent(), server.url);
    t.match(await page.locator('.snippets pre').textContent(), `curl ${server.url}/v1/chat/completions`);
    await page.getByRole('tab', { name: 'openai (Python)' }).click();
    t.match(await page.locator('.snippets pre').textContent(), `base_url="${server.url}/v1"`);
    await page.waitForFunction(() => document.querySelectorAll('.spark polyline').length === 4 &&
      (document.querySelector('.spark[data-metric="Tokens/s"] polyline')?.getAttribute('points') ?? '').split(' ').length >= 2);
    t.equal(await page.locator('.spark').count(), 4, 'running, waiting, KV cache and tokens/s charts');
    await page.screenshot({ path: join(SHOTS, `ui-server-${scheme}.png`) });
    await page.context().close();
  }
});

t.test('the theme toggle switches and is remembered; the phone layout folds the conversation list', async (t) => {
  const page = await newPage(server.url, { viewport: { width: 390, height: 844 } });
  await page.getByRole('combobox', { name: 'Model' }).locator('option', { hasText: MODEL }).waitFor({ state: 'attached' });
  await page.getByRole('button', { name: 'Switch to dark theme' }).click();
  t.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
  await page.reload();
  await page.getByRole('textbox', { name: 'Message' }).waitFor();
  t.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark', 'kept after a reload');
  const list = page.getByRole('navigation', { name: 'Conversations' });
  t.notOk(await list.isVisible(), 'the list is folded on a phone');
  await page.getByRole('button', { name: 'Conversations' }).click();
  t.ok(await list.isVisible(), 'the menu button shows it');
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  t.ok(width <= 390, `no horizontal scrolling (${width}px)`);
  await page.getByRole('button', { name: 'New chat' }).click();
  t.ok(await page.getByRole('textbox', { name: 'Message' }).isVisible());
  await page.screenshot({ path: join(SHOTS, 'ui-phone-dark.png') });
  await page.context().close();
});

t.test('runner mode: pull a model from the hub, use it in the chat, delete the other one', async (t) => {
  const small = { nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true } as const;
  const alphaPath = await fixtureModel({ ...small, seed: 31 });
  const betaPath = await fixtureModel({ ...small, seed: 32 });
  const hub = await startHubServer(new Map([['org/Beta-GGUF', { files: [{ path: 'Beta-Q4_K_M.gguf', bytes: readFileSync(betaPath) }] }]]));
  t.teardown(() => hub.close());
  const home = mkdtempSync(join(tmpdir(), 'spindle-ui-runner-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const store = new ModelStore(home);
  store.write(localKey(null, 'alpha', 'latest'), {
    schemaVersion: 1, name: 'alpha:latest', createdAt: new Date().toISOString(), source: alphaPath,
    model: await store.importFile(alphaPath, 'alpha.gguf'), mmproj: null, template: null, system: null, parameters: {},
    messages: [], license: [],
  });
  const app = await buildApp({
    engine: normalizeEngineOptions({ model: 'runner', maxModelLen: CONTEXT, threads: 1 }, 'serve'),
    servedModelNames: [],
    runner: { store, env: { HF_ENDPOINT: hub.url, HF_TOKEN: '', HF_HUB_CACHE: join(home, 'hf') } },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const page = await newPage(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
  page.on('dialog', (d) => void d.accept()); // the delete confirmation
  await page.getByRole('tab', { name: 'Server' }).click();
  const cards = page.locator('.models .model');
  await cards.first().waitFor();
  t.equal(await cards.count(), 1, 'the store holds alpha');
  await page.getByRole('textbox', { name: 'Model to pull' }).fill('hf.co/org/Beta-GGUF');
  await page.getByRole('button', { name: 'Pull' }).click();
  await page.getByRole('status').filter({ hasText: 'pulled hf.co/org/Beta-GGUF' }).waitFor({ timeout: 20_000 });
  await cards.nth(1).waitFor();
  // a pull by repository lists the file's quantization tag and :latest (as Ollama does)
  const tags = (await cards.allTextContents()).map((x) => /alpha:latest|Beta-GGUF:Q4_K_M|Beta-GGUF:latest/.exec(x)?.[0]).sort();
  t.same(tags, ['Beta-GGUF:Q4_K_M', 'Beta-GGUF:latest', 'alpha:latest'], 'the pulled model is listed under its tags');
  await cards.filter({ hasText: 'Beta-GGUF:latest' }).getByRole('button', { name: 'Use' }).click();
  t.match(await page.getByRole('combobox', { name: 'Model' }).inputValue(), /Beta/, 'the chat now uses the pulled model');
  const bodies = chatRequests(page);
  // A short reply: with the app's default (no max_tokens) a random-weight model writes to the end of the context,
  // thousands of tokens on one thread, which a loaded CI machine did not finish within the wait.
  await setSetting(await openSettings(page), 'Max tokens', '40');
  await page.getByRole('button', { name: 'Close settings' }).click();
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Hello');
  await box.press('Enter');
  await page.locator('.stats, article.message.assistant [role="alert"]').last().waitFor({ timeout: 30_000 });
  t.equal(await lastReply(page).getByRole('alert').count(), 0, `no error: ${await lastReply(page).textContent()}`);
  t.match(String(bodies[0].model), /Beta/, 'the request names the pulled model');
  t.equal(bodies[0].max_tokens, 40, 'with the max tokens set here');
  t.ok(((await lastReply(page).textContent()) ?? '').length > 0, 'it answered (loaded on demand)');
  await page.getByRole('tab', { name: 'Server' }).click();
  await cards.filter({ hasText: 'alpha' }).getByRole('button', { name: 'Delete' }).click();
  await page.waitForFunction(() => document.querySelectorAll('.models .model').length === 2);
  t.equal(await cards.filter({ hasText: 'alpha' }).count(), 0, 'alpha is gone from the list');
  t.equal(store.list().some((m) => m.manifest.name.startsWith('alpha')), false, 'and from the store');
  await page.context().close();
});

t.test('with --api-key the app asks for the key, refuses a wrong one, and works with the right one', async (t) => {
  const keyed: ServeProcess = await startServe([path, '--max-model-len', '512', '--threads', '1', '--served-model-name', MODEL, '--api-key', 'sesame']);
  t.teardown(() => keyed.stop());
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(keyed.url + '/');
  const dialog = page.getByRole('dialog', { name: 'API key' });
  await dialog.waitFor();
  const input = dialog.getByLabel('API key');
  await input.fill('wrong');
  await input.press('Enter');
  await dialog.getByRole('alert').waitFor();
  t.match(await dialog.getByRole('alert').textContent(), /invalid API key/);
  await input.fill('sesame');
  await input.press('Enter');
  await page.getByRole('textbox', { name: 'Message' }).waitFor();
  await page.getByRole('combobox', { name: 'Model' }).locator('option', { hasText: MODEL }).waitFor({ state: 'attached' });
  await openSettings(page);
  await setSetting(page, 'Max tokens', '4');
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('Hi');
  await box.press('Enter');
  await lastReply(page).getByTestId('reply-stats').waitFor();
  t.equal(await lastReply(page).getByRole('alert').count(), 0, 'the reply came with the key');
  await context.close();
});
