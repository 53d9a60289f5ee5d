// Model references as users write them, everywhere a model is accepted (serve, run, LLM, Engine):
//   a GGUF path ('./m.gguf', '/abs/m.gguf', anything ending in .gguf or naming an existing file);
//   a hub reference 'hf.co/<org>/<repo>[:<quant>]' (also 'huggingface.co/...');
//   a name '<name>[:<tag>]' or '<namespace>/<name>[:<tag>]' from the local store, where '<org>/<repo>[:<quant>]'
//   not in the store is a hub reference (as Ollama resolves 'hf.co' names and llama.cpp's -hf takes 'org/repo');
//   'registry.ollama.ai/[<namespace>/]<name>[:<tag>]' (also 'ollama.com/...') is an Ollama registry name, namespaced
//   or not (never a hub reference).
// Invariant: parseModelRef never touches the network; it throws a ModelRefError naming the rule a bad
// reference breaks (Ollama's name and tag rules).
import { existsSync, statSync } from 'node:fs';

export type ModelRef =
  | { kind: 'path'; path: string }
  | { kind: 'hub'; repo: string; quant: string | null } // repo: 'org/name'
  | { kind: 'name'; namespace: string | null; name: string; tag: string; hubRepo: string | null; explicitTag: boolean };

export class ModelRefError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ModelRefError';
  }
}

const PART = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/; // a namespace, name or repo part (Ollama: letters, digits, _ . -)
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

function checkPart(what: string, s: string, ref: string): void {
  if (!PART.test(s) || s.includes('..')) {
    throw new ModelRefError(`'${ref}': the ${what} '${s}' is not valid (letters, digits, '_', '.', '-'; at most 128; starting with a letter or digit)`);
  }
}

function splitTag(s: string, ref: string): { base: string; tag: string | null } {
  const at = s.lastIndexOf(':');
  if (at < 0) return { base: s, tag: null };
  const tag = s.slice(at + 1);
  if (!TAG.test(tag)) throw new ModelRefError(`'${ref}': the tag '${tag}' is not valid (letters, digits, '_', '.', '-'; at most 128)`);
  return { base: s.slice(0, at), tag };
}

function looksLikePath(s: string): boolean {
  if (/\.gguf$/i.test(s) || s.startsWith('./') || s.startsWith('../') || s.startsWith('/') || s.startsWith('~') || s.includes('\\')) return true;
  try {
    return existsSync(s) && statSync(s).isFile();
  } catch {
    return false;
  }
}

export function parseModelRef(ref: string): ModelRef {
  if (typeof ref !== 'string' || ref.trim() === '') throw new ModelRefError('a model reference must be a non-empty string');
  const s = ref.trim();
  if (looksLikePath(s)) return { kind: 'path', path: s };
  const registry = /^(?:https?:\/\/)?(?:registry\.ollama\.ai|(?:www\.)?ollama\.com)\/(.+)$/i.exec(s);
  if (registry) {
    const { base, tag } = splitTag(registry[1], ref);
    const parts = base.split('/');
    if (parts.length > 2) throw new ModelRefError(`'${ref}': an Ollama registry name is registry.ollama.ai/[<namespace>/]<name>[:<tag>]`);
    parts.forEach((p, i) => checkPart(parts.length === 2 && i === 0 ? 'namespace' : 'name', p, ref));
    const [namespace, name] = parts.length === 2 ? parts : ['library', parts[0]];
    return { kind: 'name', namespace: namespace.toLowerCase() === 'library' ? null : namespace, name, tag: tag ?? 'latest', hubRepo: null, explicitTag: tag !== null };
  }
  const hub = /^(?:https?:\/\/)?(?:hf\.co|huggingface\.co)\/(.+)$/i.exec(s);
  if (hub) {
    const { base, tag } = splitTag(hub[1], ref);
    const parts = base.split('/');
    if (parts.length !== 2) throw new ModelRefError(`'${ref}': a hub reference is hf.co/<org>/<repo>[:<quant>]`);
    parts.forEach((p, i) => checkPart(i === 0 ? 'organization' : 'repository', p, ref));
    return { kind: 'hub', repo: parts.join('/'), quant: tag };
  }
  const { base, tag } = splitTag(s, ref);
  const parts = base.split('/');
  if (parts.length > 2) throw new ModelRefError(`'${ref}': a name is <name>[:<tag>] or <namespace>/<name>[:<tag>] (or a path to a .gguf file)`);
  parts.forEach((p, i) => checkPart(parts.length === 2 && i === 0 ? 'namespace' : 'name', p, ref));
  const [namespace, name] = parts.length === 2 ? parts : [null, parts[0]];
  return { kind: 'name', namespace, name, tag: tag ?? 'latest', hubRepo: parts.length === 2 ? base : null, explicitTag: tag !== null };
}

/** What a reference pulls: a hub repository and quantization, or an Ollama registry name. */
export type PullTarget =
  | { kind: 'hub'; repo: string; quant: string | null }
  | { kind: 'ollama'; namespace: string | null; name: string; tag: string };

/** The pull a (non-path) reference names: hub references and '<org>/<repo>' names the hub, other names the registry. */
export function pullTargetOf(r: Exclude<ModelRef, { kind: 'path' }>): PullTarget {
  if (r.kind === 'hub') return { kind: 'hub', repo: r.repo, quant: r.quant };
  if (r.hubRepo) return { kind: 'hub', repo: r.hubRepo, quant: r.explicitTag ? r.tag : null };
  return { kind: 'ollama', namespace: r.namespace, name: r.name, tag: r.tag };
}
