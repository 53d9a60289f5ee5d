// `spindle pull <ref>`: a hub reference (hf.co/org/repo[:quant], org/repo[:quant]) or an Ollama name (llama3.2,
// llama3.2:1b: Ollama's registry) into the store, with progress; a hub model already there is verified present and
// left alone; a registry name reads its manifest again (a changed model is pulled), its blobs only when missing.
import { parseArgs } from 'node:util';
import { pullOllama } from '../../models/ollama-registry.js';
import { pullHub } from '../../models/pull.js';
import { hubConfig } from '../../models/hub-client.js';
import { ModelRefError, parseModelRef, pullTargetOf } from '../../models/ref.js';
import type { CommandIo } from '../io.js';
import { openStore, reportError } from './common.js';
import { progressPrinter } from './progress.js';

const HELP = `Usage: spindle pull <model>

Downloads a GGUF model (and its mmproj, when the repository has one) from the Hugging Face hub into the
store (SPINDLE_HOME, default ~/.spindle): hf.co/<org>/<repo>[:<quant>] or <org>/<repo>[:<quant>], Q4_K_M
when no quantization is given. A name without a slash (llama3.2, qwen3:0.6b) comes from Ollama's registry
as \`ollama pull\` takes it: the model with its template, system prompt, parameters and license (and
projector). Resumes an interrupted download; verifies every file's sha256.
HF_ENDPOINT sets the hub's URL, HF_TOKEN authenticates (gated and private repositories); OLLAMA_REGISTRY
sets the Ollama registry's URL (default https://registry.ollama.ai).
`;

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  if (values.help || positionals.length !== 1) {
    (values.help ? io.stdout : io.stderr).write(HELP);
    return values.help ? 0 : 2;
  }
  try {
    const r = parseModelRef(positionals[0]);
    if (r.kind === 'path') throw new ModelRefError(`'${positionals[0]}' is a file path; pull takes a hub reference (hf.co/<org>/<repo>[:<quant>])`);
    const target = pullTargetOf(r);
    const m = target.kind === 'ollama'
      ? await pullOllama(openStore(), target.namespace, target.name, target.tag, { onProgress: progressPrinter(io) })
      : await pullHub(openStore(), target.repo, target.quant, { cfg: hubConfig(), onProgress: progressPrinter(io) });
    const from = target.kind === 'ollama' ? ", from Ollama's registry" : '';
    io.stdout.write(`success: ${m.name} (${m.model.file}${m.mmproj ? ` + ${m.mmproj.file}` : ''}${from})\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, 'pull');
  }
}
