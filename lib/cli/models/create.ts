// `spindle create <name> -f <Modelfile>`: a named model from a Modelfile (lib/modelfile): FROM a .gguf path
// (relative to the Modelfile; imported into the store as a blob, with an mmproj*.gguf beside it), a store name or
// a hub reference (pulled first); TEMPLATE, SYSTEM, PARAMETERs, MESSAGEs, LICENSE and one ADAPTER (a LoRA adapter,
// imported as a blob) stored in the manifest, over
// what a FROM model of the store already had (Ollama's inheritance).
// Invariant: a bad Modelfile is an error naming the line, and nothing is written; the manifest is written last.
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { parseArgs } from 'node:util';
import { decodeModelfile, parseModelfile } from '../../modelfile/index.js';
import { parseModelRef, ModelRefError } from '../../models/ref.js';
import { resolveModel } from '../../models/resolve.js';
import { localKey, type Manifest, type ManifestFile } from '../../models/store.js';
import { findMmproj } from '../../vision/find-mmproj.js';
import { loadNative } from '../../native.js';
import { readModelFileInfo } from '../../gguf/file-info.js';
import type { CommandIo } from '../io.js';
import { openStore, reportError } from './common.js';
import { progressPrinter } from './progress.js';

const HELP = `Usage: spindle create <name> -f <Modelfile>

Makes a model of the store from a Modelfile (Ollama's format): FROM a .gguf path, a store name or a hub
reference; TEMPLATE (Go template), SYSTEM, PARAMETER, MESSAGE, LICENSE, ADAPTER (one LoRA adapter in llama.cpp's
GGUF format, a path relative to the Modelfile: every request of the model runs with it).
`;

/** The ADAPTER must be made for the FROM model's architecture (its tensors are checked when the model loads it). */
function checkAdapterArch(adapter: string, model: string): void {
  const a = readModelFileInfo(adapter).arch, m = readModelFileInfo(model).arch;
  if (a !== m) throw new ModelRefError(`ADAPTER ${adapter} was made for architecture '${a}', the model is '${m}'`);
}

/** A Modelfile ADAPTER must be a LoRA adapter in llama.cpp's GGUF format (its tensors are checked when a model loads it). */
function checkAdapterFile(file: string): void {
  let kind: string | null;
  try {
    kind = readModelFileInfo(file).type;
  } catch (e) {
    throw new ModelRefError(`ADAPTER ${file}: ${(e as Error).message}`);
  }
  if (kind !== 'adapter') {
    throw new ModelRefError(`ADAPTER ${file} is not a LoRA adapter (general.type ${kind === null ? 'absent' : `'${kind}'`}); ` +
      "convert one with llama.cpp's convert_lora_to_gguf.py");
  }
}

export async function main(argv: string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  let values, positionals;
  try {
    ({ values, positionals } = parseArgs({ args: argv, allowPositionals: true, strict: true, options: { help: { type: 'boolean', short: 'h' }, file: { type: 'string', short: 'f' } } }));
  } catch (e) {
    io.stderr.write(`spindle create: ${(e as Error).message}\n${HELP}`);
    return 2;
  }
  if (values.help || positionals.length !== 1) {
    (values.help ? io.stdout : io.stderr).write(HELP);
    return values.help ? 0 : 2;
  }
  try {
    const target = parseModelRef(positionals[0]);
    if (target.kind !== 'name') throw new ModelRefError(`'${positionals[0]}' is not a valid model name (<name>[:<tag>] or <namespace>/<name>[:<tag>])`);
    const path = values.file ?? 'Modelfile';
    let text: string;
    try {
      text = decodeModelfile(readFileSync(path));
    } catch (e) {
      throw new ModelRefError(`cannot read the Modelfile ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    const mf = parseModelfile(text);
    for (const w of mf.warnings) io.stderr.write(`spindle create: warning: ${w}\n`);
    // the ADAPTER is checked before anything is written to the store
    if (mf.adapters.length > 1) throw new ModelRefError(`a Modelfile takes one ADAPTER (got ${mf.adapters.length})`);
    const adapterFile = mf.adapters.length === 1 ? (isAbsolute(mf.adapters[0]) ? mf.adapters[0] : join(dirname(path), mf.adapters[0])) : null;
    if (adapterFile !== null) checkAdapterFile(adapterFile);
    const store = openStore();
    const fromRef = parseModelRef(mf.from);
    let base: Partial<Manifest> = {};
    let model, mmproj;
    let parts: ManifestFile[] = [];
    if (fromRef.kind === 'path') {
      const file = isAbsolute(fromRef.path) ? fromRef.path : join(dirname(path), fromRef.path);
      if (adapterFile !== null) checkAdapterArch(adapterFile, file);
      io.stderr.write(`importing ${file}\n`);
      // a split model's every file (its first named in FROM), each a blob under its own name
      let files: string[];
      try {
        files = readModelFileInfo(file).files;
      } catch (e) {
        throw new ModelRefError(`FROM ${file}: ${(e as Error).message}`);
      }
      const [first, ...rest] = files;
      model = await store.importFile(first, first.split(/[\\/]/).pop()!);
      for (const p of rest) parts.push(await store.importFile(p, p.split(/[\\/]/).pop()!));
      const beside = findMmproj(file, () => loadNative().NativeEngine.inspect(file).info.nEmbd).path;
      mmproj = beside ? await store.importFile(beside, beside.split(/[\\/]/).pop()!) : null;
    } else {
      const r = await resolveModel(mf.from, { store, onProgress: progressPrinter(io) });
      if (adapterFile !== null) checkAdapterArch(adapterFile, r.model);
      base = r.manifest ?? {};
      model = r.manifest!.model;
      parts = r.manifest!.parts ?? [];
      mmproj = r.manifest!.mmproj;
    }
    let adapter = base.adapter ?? null;
    if (adapterFile !== null) {
      if (adapter) throw new ModelRefError(`FROM ${mf.from} has an ADAPTER already; a model takes one`);
      io.stderr.write(`importing adapter ${adapterFile}\n`);
      adapter = await store.importFile(adapterFile, adapterFile.split(/[\\/]/).pop()!);
    }
    const name = `${target.namespace ? `${target.namespace}/` : ''}${target.name}:${target.tag}`;
    const manifest: Manifest = {
      schemaVersion: 1, name, createdAt: new Date().toISOString(), source: `FROM ${mf.from}`, model, ...(parts.length ? { parts } : {}), mmproj, adapter,
      template: mf.template ?? base.template ?? null,
      system: mf.system ?? base.system ?? null,
      parameters: { ...(base.parameters ?? {}), ...mf.parameters } as Manifest['parameters'],
      messages: mf.messages.length ? mf.messages : base.messages ?? [],
      license: mf.license.length ? mf.license : base.license ?? [],
    };
    store.write(localKey(target.namespace, target.name, target.tag), manifest);
    io.stdout.write(`success: created ${name}\n`);
    return 0;
  } catch (e) {
    return reportError(e, io, 'create');
  }
}
