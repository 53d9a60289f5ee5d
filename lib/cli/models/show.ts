// `spindle show <model>`: a model's facts as `ollama show` prints them (architecture, parameters, quantization,
// context and embedding length, the projector, the Modelfile's parameters, system prompt and license), or one
// part: --template, --parameters, --system, --license.
import { parseArgs } from 'node:util';
import { readModelFileInfo } from '../../gguf/file-info.js';
import { resolveModel } from '../../models/resolve.js';
import { loadNative } from '../../native.js';
import type { CommandIo } from '../io.js';
import { openStore, reportError } from './common.js';

const HELP = `Usage: spindle show <model> [--template | --parameters | --system | --license]
`;

function count(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(0)}M`;
  return `${(n / 1e3).toFixed(0)}K`;
}

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv, allowPositionals: true, strict: true,
    options: { help: { type: 'boolean', short: 'h' }, template: { type: 'boolean' }, parameters: { type: 'boolean' }, system: { type: 'boolean' }, license: { type: 'boolean' } },
  });
  if (values.help || positionals.length !== 1) {
    (values.help ? io.stdout : io.stderr).write(HELP);
    return values.help ? 0 : 2;
  }
  try {
    const r = await resolveModel(positionals[0], { store: openStore(), pull: false });
    const m = r.manifest;
    const info = readModelFileInfo(r.model);
    const native = loadNative().NativeEngine.inspect(r.model).info;
    const template = m?.template ?? native.chatTemplate ?? '';
    const params = m?.parameters ?? {};
    const paramLines = Object.entries(params).flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x) => `${k.padEnd(20)}${typeof x === 'string' ? JSON.stringify(x) : x}`));
    const part = values.template ? `${template}\n`
      : values.parameters ? (paramLines.length ? `${paramLines.join('\n')}\n` : '')
        : values.system ? `${m?.system ?? ''}\n`
          : values.license ? `${(m?.license?.length ? m.license : info.license ? [info.license] : []).join('\n')}\n` : null;
    if (part !== null) {
      io.stdout.write(part);
      return 0;
    }
    const kv = (k: string, v: string | number) => `    ${k.padEnd(20)}${v}\n`;
    let out = '  Model\n';
    out += kv('architecture', info.arch);
    out += kv('parameters', count(info.nParams));
    out += kv('quantization', info.fileTypeName ?? 'unknown');
    if (info.ctxTrain) out += kv('context length', info.ctxTrain);
    if (native.nEmbd) out += kv('embedding length', native.nEmbd);
    if (r.mmproj) {
      const p = loadNative().mmprojInfo(r.mmproj);
      out += '\n  Projector\n' + kv('architecture', p.projector) + kv('embedding length', p.nEmbd) + kv('layers', p.nLayer) + kv('patch size', p.patchSize);
    }
    if (r.adapter) out += `\n  Adapter\n${kv('file', r.adapter)}`;
    if (paramLines.length) out += `\n  Parameters\n${paramLines.map((l) => `    ${l}\n`).join('')}`;
    if (m?.system) out += `\n  System\n    ${m.system.split('\n').join('\n    ')}\n`;
    const license = m?.license?.length ? m.license : info.license ? [info.license] : [];
    if (license.length) out += `\n  License\n    ${license.join('\n').split('\n').slice(0, 8).join('\n    ')}\n`;
    io.stdout.write(`${out}\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, 'show');
  }
}
