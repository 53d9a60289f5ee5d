// The `spindle` subcommands: one line each. `name` is the words typed after `spindle`; `load` imports
// the module lazily (so `spindle --help` loads nothing heavy), which must export
// `main(argv: string[], io?: { stdout, stderr }): Promise<number>` returning the exit code.
// Invariant: names are unique; a longer name wins over a shorter one it starts with ('bench serve' over
// 'bench').
import type { CommandIo } from './io.js';

export interface CommandModule {
  main(argv: string[], io?: CommandIo): Promise<number>;
}

export interface CommandEntry {
  name: string;
  summary: string;
  load: () => Promise<CommandModule>;
}

export const COMMANDS: CommandEntry[] = [
  { name: 'bench', summary: 'offline throughput benchmark of the engine on a GGUF model (like llama-bench)', load: () => import('../bench/offline/command.js') },
  { name: 'serve', summary: 'OpenAI- and Ollama-compatible HTTP server (no model: a built-in random-weight demo)', load: () => import('../server/command.js') },
  { name: 'run', summary: 'chat with a model (a store name, hf.co/<org>/<repo>[:<quant>] or a .gguf path)', load: () => import('./run.js') },
  { name: 'pull', summary: 'download a GGUF model from the Hugging Face hub into the store', load: () => import('./models/pull.js') },
  { name: 'list', summary: 'list the models in the store', load: () => import('./models/list.js') },
  { name: 'ls', summary: 'the same as list', load: () => import('./models/list.js') },
  { name: 'show', summary: "a model's architecture, parameters, quantization, context, template and license", load: () => import('./models/show.js') },
  { name: 'create', summary: 'make a model from a Modelfile (FROM, TEMPLATE, SYSTEM, PARAMETER, MESSAGE, LICENSE, ADAPTER)', load: () => import('./models/create.js') },
  { name: 'rm', summary: 'remove models from the store', load: () => import('./models/rm.js') },
  { name: 'cp', summary: 'copy a model under a new name', load: () => import('./models/cp.js') },
  { name: 'ps', summary: 'list the models a running server (spindle serve --ollama) has loaded', load: () => import('./ps.js') },
  { name: 'bench serve', summary: 'benchmark a running OpenAI- or Ollama-compatible server (like vllm bench serve)', load: () => import('../bench/serve/command.js') },
];
