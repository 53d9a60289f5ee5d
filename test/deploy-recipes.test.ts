// The deployment files (issue 21), checked without Docker or Kubernetes: the Dockerfiles pass dockerfile-utils'
// validator (hadolint, helm and kubeconform are not installable from npm or Debian here) and keep the rules (non-root,
// HEALTHCHECK on /health, the entrypoint, no secret in ENV); docker/entrypoint.sh passes shellcheck and runs outside
// Docker (MODEL_NAME, PORT, a flag first means serve, exec so SIGTERM reaches spindle); the Helm chart's templates,
// rendered by a small renderer that knows exactly the constructs they use (anything else fails the test), give
// Kubernetes objects that validate against the Kubernetes JSON schemas (kubernetes-models, ajv), the Gateway API
// HTTPRoute against the Gateway API's (@kubernetes-models/gateway-api).
import t from 'tap';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { validate as validateDockerfile } from 'dockerfile-utils';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PersistentVolumeClaim, Service } from 'kubernetes-models/v1';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute';
import { fixtureModel } from './helpers/fixtures.js';
import { repoRoot } from './helpers/serve-process.js';

const read = (p: string): string => readFileSync(join(repoRoot, p), 'utf8');

t.test('Dockerfiles: valid, non-root, HEALTHCHECK on /health, the entrypoint, no secret baked in', async (t) => {
  for (const file of ['docker/Dockerfile', 'docker/Dockerfile.cuda']) {
    const text = read(file);
    t.same(validateDockerfile(text).map((d) => `${d.range.start.line + 1}: ${d.message}`), [], `${file}: no diagnostics`);
    const runtime = text.slice(text.lastIndexOf('\nFROM '));
    t.match(runtime, /\nUSER (node|spindle)\n/, `${file}: the runtime stage runs as a non-root user`);
    t.match(runtime, /HEALTHCHECK [^\n]*\\\n\s+CMD \[.*\/health/, `${file}: HEALTHCHECK on /health`);
    t.match(runtime, /ENTRYPOINT \["spindle-entrypoint"\]/);
    t.match(runtime, /CMD \["serve"/);
    t.match(runtime, /--ignore-scripts/, `${file}: the tarball installs with install scripts disabled`);
    t.match(runtime, /VOLUME \["\/data"\]/);
    t.match(runtime, /SPINDLE_HOME=\/data\/spindle/);
    t.match(runtime, /HF_HOME=\/data\/huggingface/);
    t.notMatch(text, /^(ENV|ARG)\s[^\n]*(TOKEN|API_KEY|SECRET|PASSWORD)/m, `${file}: no secret in ENV or ARG`);
  }
  const ignore = read('.dockerignore').split('\n');
  for (const p of ['.git', 'node_modules', 'build', 'dist', '.env', '*.gguf', 'test/.fixtures']) t.ok(ignore.includes(p), `.dockerignore: ${p}`);
});

t.test('docker-compose.yml: the three styles and CUDA, secrets only passed through', async (t) => {
  const compose = parseYaml(read('docker-compose.yml'), { merge: true }) as { services: Record<string, { ports: string[]; environment: Record<string, string>; profiles: string[]; volumes: string[] }> };
  t.same(Object.keys(compose.services).sort(), ['cuda', 'ollama', 'sglang', 'vllm']);
  t.same(compose.services.vllm.ports, ['8000:8000']);
  t.same(compose.services.ollama.ports, ['11434:11434']);
  t.same(compose.services.sglang.ports, ['30000:30000']);
  for (const [name, s] of Object.entries(compose.services)) {
    t.equal(s.environment.HF_TOKEN, '${HF_TOKEN:-}', `${name}: HF_TOKEN passes through`);
    t.equal(s.environment.SPINDLE_API_KEY, '${SPINDLE_API_KEY:-}', `${name}: SPINDLE_API_KEY passes through`);
    t.same(s.volumes, ['spindle-data:/data'], `${name}: the data volume`);
    t.equal(s.environment.PORT, s.ports[0].split(':')[1], `${name}: PORT matches the published port`);
  }
  t.equal(compose.services.ollama.environment.MODEL_NAME, undefined, 'ollama style: no model, runner mode');
});

t.test('docker/entrypoint.sh passes shellcheck', { skip: hasShellcheck() ? false : 'shellcheck is not installed (.ci/run installs it)' }, async (t) => {
  t.equal(execFileSync('shellcheck', ['--shell=sh', join(repoRoot, 'docker', 'entrypoint.sh')], { encoding: 'utf8' }), '');
});

function hasShellcheck(): boolean {
  try {
    execFileSync('shellcheck', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Runs docker/entrypoint.sh with `spindle` on PATH (the built CLI), as the image does; resolves at `listening on`. */
async function entrypoint(args: string[], env: Record<string, string>) {
  const bin = mkdtempSync(join(tmpdir(), 'spindle-entry-'));
  // What npm's bin link does for an installed package: `spindle` runs dist/cli/main.js with node.
  writeFileSync(join(bin, 'spindle'), `#!/bin/sh\nexec "${process.execPath}" "${join(repoRoot, 'dist', 'cli', 'main.js')}" "$@"\n`, { mode: 0o755 });
  const child = spawn('sh', [join(repoRoot, 'docker', 'entrypoint.sh'), ...args], {
    env: { PATH: `${bin}:${process.env.PATH}`, HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
  const url = await new Promise<string | null>((resolve) => {
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /listening on (http:\/\/\S+) /.exec(out);
      if (m) resolve(m[1].replace('0.0.0.0', '127.0.0.1'));
    });
    child.once('exit', () => resolve(null));
  });
  return { child, url, out: () => out, err: () => err, cleanup: () => rmSync(bin, { recursive: true, force: true }) };
}

t.test('docker/entrypoint.sh outside Docker: MODEL_NAME, PORT, flags first, exec and SIGTERM', async (t) => {
  const model = await fixtureModel({ nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 2, nFf: 128, weights: 'F32', seed: 11, arch: 'qwen3', tokenizer: 'qwen3', tiedEmbeddings: true });
  const run = await entrypoint(['--max-model-len', '256', '--threads', '1'], { MODEL_NAME: model, PORT: '0', SPINDLE_API_KEY: 'k' });
  t.teardown(run.cleanup);
  t.ok(run.url, `listening: ${run.err()}`);
  t.match(run.out(), /listening on http:\/\/0\.0\.0\.0:\d+ /, 'on every interface ($PORT 0: any free port)');
  const models = await fetch(`${run.url}/v1/models`, { headers: { authorization: 'Key k' } });
  t.equal(models.status, 200, 'SPINDLE_API_KEY from the environment is the key');
  t.equal(((await models.json()) as { data: Array<{ id: string; max_model_len: number }> }).data[0].id, basename(model, '.gguf'), 'MODEL_NAME is the model');
  t.equal((await fetch(`${run.url}/v1/models`)).status, 401);
  t.equal((await fetch(`${run.url}/health`)).status, 200);
  const cmdline = readFileSync(`/proc/${run.child.pid}/cmdline`, 'utf8').split('\0').join(' ');
  t.match(cmdline, /main\.js serve --max-model-len 256 /, 'exec: the shell became spindle serve (a flag first means serve)');
  const exited = once(run.child, 'exit');
  run.child.kill('SIGTERM');
  t.same((await exited)[0], 0, 'SIGTERM: spindle drains and exits 0');

  const bad = await entrypoint([], { PORT: 'eighty' });
  t.teardown(bad.cleanup);
  t.equal(bad.url, null);
  t.equal(bad.child.exitCode, 2);
  t.match(bad.err(), "spindle-entrypoint: PORT must be a port number (got 'eighty')");
});

type Ctx = { Values: Record<string, unknown>; Release: { Name: string }; Chart: { Name: string } };

function lookup(ctx: Ctx, path: string): unknown {
  if (!/^(\.[A-Za-z][A-Za-z0-9]*)+$/.test(path)) throw new Error(`the chart renderer does not know '${path}'`);
  let v: unknown = ctx;
  for (const k of path.slice(1).split('.')) v = v === undefined || v === null ? undefined : (v as Record<string, unknown>)[k];
  return v;
}

function evaluate(ctx: Ctx, expr: string): string {
  let m = /^toYaml (\S+) \| nindent (\d+)$/.exec(expr);
  if (m) return `\n${stringify(lookup(ctx, m[1])).trimEnd().split('\n').map((l) => ' '.repeat(Number(m![2])) + l).join('\n')}`;
  m = /^(\S+) \| quote$/.exec(expr);
  if (m) return JSON.stringify(String(lookup(ctx, m[1])));
  const v = lookup(ctx, expr);
  if (v === undefined || typeof v === 'object') throw new Error(`the chart renderer: '${expr}' is not a scalar value`);
  return String(v);
}

/** Helm's rendering for the constructs the chart uses: values, `| quote`, `toYaml x | nindent n`, if/end, `{{-`/`-}}`. */
function render(template: string, ctx: Ctx): string {
  const parts = template.split(/(\{\{-?\s*.*?\s*-?\}\})/s);
  let out = '';
  const emitting: boolean[] = [];
  let trimNext = false;
  for (const part of parts) {
    const m = /^\{\{(-?)\s*(.*?)\s*(-?)\}\}$/s.exec(part);
    if (!m) {
      const text = trimNext ? part.replace(/^\s+/, '') : part;
      if (emitting.every(Boolean)) out += text;
      trimNext = false;
      continue;
    }
    if (m[1] === '-') out = out.replace(/\s+$/, '');
    trimNext = m[3] === '-';
    const action = m[2];
    const iff = /^if (\S+)$/.exec(action);
    if (iff) emitting.push(Boolean(lookup(ctx, iff[1])));
    else if (action === 'end') emitting.pop();
    else if (emitting.every(Boolean)) out += evaluate(ctx, action);
  }
  if (emitting.length > 0) throw new Error('the chart renderer: an if without its end');
  return out;
}

function renderChart(overrides: (v: Record<string, any>) => void): Array<Record<string, any>> {
  const dir = join(repoRoot, 'deploy', 'helm', 'spindle');
  const values = parseYaml(readFileSync(join(dir, 'values.yaml'), 'utf8')) as Record<string, any>;
  overrides(values);
  const chart = parseYaml(readFileSync(join(dir, 'Chart.yaml'), 'utf8')) as { name: string };
  const ctx: Ctx = { Values: values, Release: { Name: 'llm' }, Chart: { Name: chart.name } };
  const objects: Array<Record<string, any>> = [];
  for (const f of readdirSync(join(dir, 'templates')).sort()) {
    for (const doc of parseAllDocuments(render(readFileSync(join(dir, 'templates', f), 'utf8'), ctx))) {
      if (doc.errors.length > 0) throw new Error(`${f}: ${doc.errors[0].message}`);
      const o = doc.toJS() as Record<string, any> | null;
      if (o) objects.push(o);
    }
  }
  return objects;
}

const VALIDATORS: Record<string, (o: any) => void> = {
  Deployment: (o) => new Deployment(o).validate(),
  Service: (o) => new Service(o).validate(),
  PersistentVolumeClaim: (o) => new PersistentVolumeClaim(o).validate(),
  HorizontalPodAutoscaler: (o) => new HorizontalPodAutoscaler(o).validate(),
  Ingress: (o) => new Ingress(o).validate(),
  HTTPRoute: (o) => new HTTPRoute(o).validate(),
};

t.test('the Helm chart renders to valid Kubernetes objects (defaults)', async (t) => {
  const objects = renderChart(() => {});
  t.same(objects.map((o) => o.kind).sort(), ['Deployment', 'HorizontalPodAutoscaler', 'Ingress', 'PersistentVolumeClaim', 'Service']);
  for (const o of objects) t.doesNotThrow(() => VALIDATORS[o.kind](o), `${o.kind} validates against the Kubernetes schema`);
  const dep = objects.find((o) => o.kind === 'Deployment')!;
  const c = dep.spec.template.spec.containers[0];
  for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) t.equal(c[probe].httpGet.path, '/health', `${probe} on /health`);
  t.same(c.volumeMounts, [{ name: 'model-cache', mountPath: '/data' }]);
  t.equal(dep.spec.template.spec.volumes[0].persistentVolumeClaim.claimName, 'llm-model-cache');
  t.match(c.env, [{ name: 'MODEL_NAME', value: 'hf.co/Qwen/Qwen3-0.6B-GGUF:Q8_0' }, { name: 'PORT', value: '8000' }, { name: 'SPINDLE_LOG_FORMAT', value: 'json' }]);
  t.same(c.args, ['serve', '--max-model-len', '4096']);
  t.equal(dep.spec.template.spec.securityContext.runAsNonRoot, true);
  t.ok(dep.spec.template.spec.terminationGracePeriodSeconds > 30, 'grace period beyond the 30 s drain');
  const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler')!;
  t.equal(hpa.spec.metrics[0].pods.metric.name, 'spindle_num_requests_waiting', 'scales on waiting requests');
  t.match(read('lib/server/plugins/metrics.ts'), "'spindle:num_requests_waiting'", 'a gauge /metrics serves (prometheus-adapter renames : to _)');
  const ing = objects.find((o) => o.kind === 'Ingress')!;
  t.equal(ing.metadata.annotations['nginx.ingress.kubernetes.io/upstream-hash-by'], '$http_x_session_id', 'session affinity on X-Session-Id');
  t.equal(objects.find((o) => o.kind === 'Service')!.spec.selector['app.kubernetes.io/instance'], 'llm');
});

t.test('the Helm chart: a Gateway API HTTPRoute with session persistence instead of the ingress', async (t) => {
  const objects = renderChart((v) => {
    v.ingress.enabled = false;
    v.gateway.enabled = true;
    v.gateway.name = 'edge';
    v.gateway.namespace = 'infra';
  });
  t.same(objects.map((o) => o.kind).sort(), ['Deployment', 'HTTPRoute', 'HorizontalPodAutoscaler', 'PersistentVolumeClaim', 'Service']);
  for (const o of objects) t.doesNotThrow(() => VALIDATORS[o.kind](o), `${o.kind} validates (HTTPRoute: Gateway API's schema)`);
  const route = objects.find((o) => o.kind === 'HTTPRoute')!;
  t.same(route.spec.parentRefs, [{ name: 'edge', namespace: 'infra' }], 'attached to the named Gateway');
  t.same(route.spec.hostnames, ['spindle.example.com']);
  const rule = route.spec.rules[0];
  t.same(rule.backendRefs, [{ name: 'llm', port: 8000 }], 'to the Service');
  t.same(rule.sessionPersistence, { sessionName: 'X-Session-Id', type: 'Header' }, 'a conversation stays on one replica');
  t.equal(rule.timeouts.request, '600s', 'long generations are not cut');
  const sameNamespace = renderChart((v) => { v.gateway.enabled = true; }).find((o) => o.kind === 'HTTPRoute')!;
  t.same(sameNamespace.spec.parentRefs, [{ name: 'spindle-gateway' }], "no namespace: the release's");
  t.throws(() => new HTTPRoute({ ...route, spec: { ...route.spec, rules: [{ ...rule, sessionPersistence: { type: 'Sticky' } }] } }).validate(),
    'the schema check is real: an unknown persistence type fails');
});

t.test('the Helm chart: GPU, secrets by reference, autoscaling and ingress off', async (t) => {
  const objects = renderChart((v) => {
    v.gpu.enabled = true;
    v.secretName = 'spindle-secrets';
    v.autoscaling.enabled = false;
    v.ingress.enabled = false;
    v.modelCache.storageClassName = 'fast';
  });
  t.same(objects.map((o) => o.kind).sort(), ['Deployment', 'PersistentVolumeClaim', 'Service']);
  for (const o of objects) t.doesNotThrow(() => VALIDATORS[o.kind](o), `${o.kind} validates`);
  const c = objects.find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0];
  t.same(c.args, ['serve', '--max-model-len', '4096', '--device', 'cuda']);
  t.same(c.env.filter((e: any) => e.valueFrom).map((e: any) => [e.name, e.valueFrom.secretKeyRef.name]), [['HF_TOKEN', 'spindle-secrets'], ['SPINDLE_API_KEY', 'spindle-secrets']]);
  t.equal(objects.find((o) => o.kind === 'PersistentVolumeClaim')!.spec.storageClassName, 'fast');
  t.throws(() => render('{{ .Values.x | upper }}', { Values: { x: 'a' }, Release: { Name: 'r' }, Chart: { Name: 'c' } }), 'an unknown construct fails the render');
});
