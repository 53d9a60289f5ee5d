// Output formats of `spindle bench`, printed as the tests finish: a llama-bench style markdown table,
// JSON (an array of records with the raw samples), JSONL (one record a line) and CSV (the scalar fields).
// Invariant: the concatenation of header(), every test(r) and footer() is a complete document in its format
// (a JSON array that parses, a CSV with one header line, a markdown table with one header row).
import type { OutputFormat } from './args.js';
import type { TestRecord } from './record.js';

export interface Printer {
  header(): string;
  test(r: TestRecord): string;
  footer(): string;
}

export interface PrinterOptions {
  version: string;
  bandwidth: boolean; // add the bandwidth-bound columns
}

/** The record fields that hold one value (CSV columns): everything but the sample arrays. */
export const SCALAR_FIELDS: readonly (keyof TestRecord)[] = [
  'spindle_version', 'cpu_info', 'backends', 'model_filename', 'model_type', 'model_size', 'model_file_size',
  'model_n_params', 'model_file_type', 'n_threads', 'n_prompt', 'n_gen', 'n_seqs', 'seed', 'test', 'test_time',
  'avg_ns', 'stddev_ns', 'avg_ts', 'stddev_ts', 'bandwidth_gbps', 'bw_bound_ts', 'bw_pct',
];

/** Bytes as llama-bench prints them: MiB below 1 GiB, else GiB. */
export function formatSize(bytes: number): string {
  const mib = bytes / 1024 / 1024;
  return mib < 1024 ? `${mib.toFixed(2)} MiB` : `${(mib / 1024).toFixed(2)} GiB`;
}

export function formatParams(n: number): string {
  return n < 1e9 ? `${(n / 1e6).toFixed(2)} M` : `${(n / 1e9).toFixed(2)} B`;
}

interface Column {
  title: string;
  width: number; // negative: left-aligned (printf's %-*s)
  value: (r: TestRecord) => string;
}

function columns(opts: PrinterOptions): Column[] {
  const cols: Column[] = [
    { title: 'model', width: -30, value: (r) => r.model_type },
    { title: 'size', width: 10, value: (r) => formatSize(r.model_file_size) },
    { title: 'params', width: 10, value: (r) => formatParams(r.model_n_params) },
    { title: 'backend', width: -10, value: (r) => r.backends },
    { title: 'threads', width: 7, value: (r) => String(r.n_threads) },
    { title: 'test', width: 15, value: (r) => r.test },
    { title: 't/s', width: 20, value: (r) => `${r.avg_ts.toFixed(2)} ± ${r.stddev_ts.toFixed(2)}` },
  ];
  if (opts.bandwidth) {
    cols.push({ title: 'bw bound t/s', width: 12, value: (r) => (r.bw_bound_ts === null ? '-' : r.bw_bound_ts.toFixed(2)) });
    cols.push({ title: '% of bound', width: 10, value: (r) => (r.bw_pct === null ? '-' : r.bw_pct.toFixed(1)) });
  }
  return cols;
}

const cell = (text: string, width: number) => (width < 0 ? text.padEnd(-width) : text.padStart(width));

function markdownPrinter(opts: PrinterOptions): Printer {
  const cols = columns(opts);
  return {
    header: () => `| ${cols.map((c) => cell(c.title, c.width)).join(' | ')} |\n` +
      `| ${cols.map((c) => '-'.repeat(Math.abs(c.width) - 1) + (c.width > 0 ? ':' : '-')).join(' | ')} |\n`,
    test: (r) => `| ${cols.map((c) => cell(c.value(r), c.width)).join(' | ')} |\n`,
    footer: () => {
      const lines = ['', `build: spindle ${opts.version}`];
      if (opts.bandwidth) lines.push('bw bound: n_seqs * bandwidth / model weight bytes per decode step (KV-cache reads not counted)');
      return lines.join('\n') + '\n';
    },
  };
}

function jsonPrinter(): Printer {
  let count = 0;
  return {
    header: () => '[',
    test: (r) => `${count++ === 0 ? '\n' : ',\n'}${JSON.stringify(r, null, 2).replace(/^/gm, '  ')}`,
    footer: () => (count === 0 ? ']\n' : '\n]\n'),
  };
}

function csvValue(v: unknown): string {
  const text = v === null || v === undefined ? '' : String(v);
  return `"${text.replace(/"/g, '""')}"`;
}

function csvPrinter(): Printer {
  return {
    header: () => SCALAR_FIELDS.join(',') + '\n',
    test: (r) => SCALAR_FIELDS.map((f) => csvValue(r[f])).join(',') + '\n',
    footer: () => '',
  };
}

export function createPrinter(format: OutputFormat, opts: PrinterOptions): Printer {
  switch (format) {
    case 'md':
    case 'table':
      return markdownPrinter(opts);
    case 'json':
      return jsonPrinter();
    case 'jsonl':
      return { header: () => '', test: (r) => JSON.stringify(r) + '\n', footer: () => '' };
    case 'csv':
      return csvPrinter();
  }
}
