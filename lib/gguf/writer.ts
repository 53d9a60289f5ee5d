// GGUF v3 writer: metadata (all value types, nested arrays), tensor infos and tensor data.
// Invariant: the bytes written are exactly what gguf.cpp reads back: little-endian, u64 lengths, tensor
// offsets relative to the data section, every tensor starting at a multiple of `general.alignment` (default
// 32) and padded to it, tensors in declaration order. Tensor data is streamed one tensor (or chunk) at a time,
// so files of any size never sit in memory whole.
import { open, unlink } from 'node:fs/promises';
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_VERSION,
  GgmlType,
  GgufValueType,
  ggmlTensorBytes,
} from './constants.js';

export type GgufScalar = number | bigint | boolean | string;

/** An array value: element type plus elements (typed arrays accepted for numeric types). */
export interface GgufArray {
  type: GgufValueType;
  values: readonly GgufValue[] | ArrayLike<number>;
}

export type GgufValue = GgufScalar | GgufArray;

export interface GgufKv {
  key: string;
  type: GgufValueType;
  value: GgufValue;
  encoded: Buffer; // key, type tag and value exactly as they appear in the file
}

export interface GgufTensorInfo {
  name: string;
  ne: readonly number[]; // GGUF order: ne[0] is the row length
  type: GgmlType;
  offset: number; // bytes, from the start of the data section
  nbytes: number; // bytes of data, without padding
}

/** Data for one tensor: one buffer, or chunks (sync or async) whose lengths add up to the tensor's size. */
export type TensorData = Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

const SCALAR_SIZE: Partial<Record<GgufValueType, number>> = {
  [GgufValueType.UINT8]: 1, [GgufValueType.INT8]: 1, [GgufValueType.UINT16]: 2, [GgufValueType.INT16]: 2,
  [GgufValueType.UINT32]: 4, [GgufValueType.INT32]: 4, [GgufValueType.FLOAT32]: 4, [GgufValueType.BOOL]: 1,
  [GgufValueType.UINT64]: 8, [GgufValueType.INT64]: 8, [GgufValueType.FLOAT64]: 8,
};

const INT_RANGE: Partial<Record<GgufValueType, [number, number]>> = {
  [GgufValueType.UINT8]: [0, 0xff], [GgufValueType.INT8]: [-0x80, 0x7f],
  [GgufValueType.UINT16]: [0, 0xffff], [GgufValueType.INT16]: [-0x8000, 0x7fff],
  [GgufValueType.UINT32]: [0, 0xffffffff], [GgufValueType.INT32]: [-0x80000000, 0x7fffffff],
};

function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}

/** Serialized size in bytes of a value of type `type` (without the type tag). */
function valueSize(type: GgufValueType, value: GgufValue, key: string): number {
  if (type === GgufValueType.STRING) {
    if (typeof value !== 'string') throw new Error(`${key}: expected a string`);
    return 8 + Buffer.byteLength(value, 'utf8');
  }
  if (type === GgufValueType.ARRAY) {
    const arr = value as GgufArray;
    if (typeof arr !== 'object' || arr === null || !('values' in arr)) throw new Error(`${key}: expected an array`);
    const fixed = SCALAR_SIZE[arr.type];
    if (fixed !== undefined) return 12 + fixed * arr.values.length;
    let size = 12;
    const values = arr.values as readonly GgufValue[];
    for (let i = 0; i < values.length; i++) size += valueSize(arr.type, values[i], key);
    return size;
  }
  const size = SCALAR_SIZE[type];
  if (size === undefined) throw new Error(`${key}: unknown value type ${type}`);
  return size;
}

/** Writes values into a preallocated buffer; `pos` advances. */
class Encoder {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  u32(v: number): void { this.pos = this.buf.writeUInt32LE(v, this.pos); }
  u64(v: number | bigint): void { this.pos = this.buf.writeBigUInt64LE(BigInt(v), this.pos); }
  str(s: string): void {
    const n = Buffer.byteLength(s, 'utf8');
    this.u64(n);
    this.pos += this.buf.write(s, this.pos, n, 'utf8');
  }

  value(type: GgufValueType, v: GgufValue, key: string): void {
    const b = this.buf;
    switch (type) {
      case GgufValueType.STRING: this.str(v as string); return;
      case GgufValueType.ARRAY: this.array(v as GgufArray, key); return;
      case GgufValueType.BOOL:
        if (typeof v !== 'boolean') throw new Error(`${key}: expected a boolean`);
        this.pos = b.writeUInt8(v ? 1 : 0, this.pos); return;
      case GgufValueType.FLOAT32: this.pos = b.writeFloatLE(checkNumber(v, key), this.pos); return;
      case GgufValueType.FLOAT64: this.pos = b.writeDoubleLE(checkNumber(v, key), this.pos); return;
      case GgufValueType.UINT64: this.pos = b.writeBigUInt64LE(checkBig(v, key, false), this.pos); return;
      case GgufValueType.INT64: this.pos = b.writeBigInt64LE(checkBig(v, key, true), this.pos); return;
      default: this.int(type, v, key);
    }
  }

  private int(type: GgufValueType, v: GgufValue, key: string): void {
    const range = INT_RANGE[type];
    if (!range) throw new Error(`${key}: unknown value type ${type}`);
    const n = checkNumber(v, key);
    if (!Number.isInteger(n) || n < range[0] || n > range[1]) {
      throw new Error(`${key}: ${n} does not fit ${GgufValueType[type]}`);
    }
    const b = this.buf;
    switch (type) {
      case GgufValueType.UINT8: this.pos = b.writeUInt8(n, this.pos); break;
      case GgufValueType.INT8: this.pos = b.writeInt8(n, this.pos); break;
      case GgufValueType.UINT16: this.pos = b.writeUInt16LE(n, this.pos); break;
      case GgufValueType.INT16: this.pos = b.writeInt16LE(n, this.pos); break;
      case GgufValueType.UINT32: this.pos = b.writeUInt32LE(n, this.pos); break;
      default: this.pos = b.writeInt32LE(n, this.pos);
    }
  }

  private array(arr: GgufArray, key: string): void {
    this.u32(arr.type);
    this.u64(arr.values.length);
    const values = arr.values as ArrayLike<GgufValue>;
    for (let i = 0; i < values.length; i++) this.value(arr.type, values[i], key);
  }
}

function checkNumber(v: GgufValue, key: string): number {
  if (typeof v === 'bigint') return Number(v);
  if (typeof v !== 'number') throw new Error(`${key}: expected a number`);
  return v;
}

function checkBig(v: GgufValue, key: string, signed: boolean): bigint {
  if (typeof v === 'number' && !Number.isInteger(v)) throw new Error(`${key}: ${v} is not an integer`);
  if (typeof v !== 'number' && typeof v !== 'bigint') throw new Error(`${key}: expected an integer`);
  const b = BigInt(v);
  const min = signed ? -(1n << 63n) : 0n;
  const max = signed ? (1n << 63n) - 1n : (1n << 64n) - 1n;
  if (b < min || b > max) throw new Error(`${key}: ${b} does not fit ${signed ? 'INT64' : 'UINT64'}`);
  return b;
}

export class GgufWriter {
  private readonly kvs: GgufKv[] = [];
  private readonly tensors: GgufTensorInfo[] = [];
  private readonly keys = new Set<string>();
  private readonly names = new Set<string>();
  private dataSize = 0; // bytes, padded
  private align = GGUF_DEFAULT_ALIGNMENT;

  /** `alignment` other than the default is also written as `general.alignment`. */
  constructor(options: { alignment?: number } = {}) {
    if (options.alignment !== undefined && options.alignment !== GGUF_DEFAULT_ALIGNMENT) {
      this.addUint32('general.alignment', options.alignment);
    }
  }

  get alignment(): number { return this.align; }
  get tensorInfos(): readonly GgufTensorInfo[] { return this.tensors; }
  get kvPairs(): readonly GgufKv[] { return this.kvs; }

  add(key: string, type: GgufValueType, value: GgufValue): this {
    if (this.keys.has(key)) throw new Error(`duplicate metadata key ${key}`);
    if (key === 'general.alignment') this.setAlignment(type, value);
    // encoding now validates every value (type, range) before anything is stored
    const size = 8 + Buffer.byteLength(key, 'utf8') + 4 + valueSize(type, value, key);
    const enc = new Encoder(Buffer.alloc(size));
    enc.str(key);
    enc.u32(type);
    enc.value(type, value, key);
    if (enc.pos !== size) throw new Error(`internal: ${key} encoded to ${enc.pos} bytes, expected ${size}`);
    this.keys.add(key);
    this.kvs.push({ key, type, value, encoded: enc.buf });
    return this;
  }

  addString(key: string, v: string): this { return this.add(key, GgufValueType.STRING, v); }
  addBool(key: string, v: boolean): this { return this.add(key, GgufValueType.BOOL, v); }
  addUint8(key: string, v: number): this { return this.add(key, GgufValueType.UINT8, v); }
  addInt8(key: string, v: number): this { return this.add(key, GgufValueType.INT8, v); }
  addUint16(key: string, v: number): this { return this.add(key, GgufValueType.UINT16, v); }
  addInt16(key: string, v: number): this { return this.add(key, GgufValueType.INT16, v); }
  addUint32(key: string, v: number): this { return this.add(key, GgufValueType.UINT32, v); }
  addInt32(key: string, v: number): this { return this.add(key, GgufValueType.INT32, v); }
  addUint64(key: string, v: number | bigint): this { return this.add(key, GgufValueType.UINT64, v); }
  addInt64(key: string, v: number | bigint): this { return this.add(key, GgufValueType.INT64, v); }
  addFloat32(key: string, v: number): this { return this.add(key, GgufValueType.FLOAT32, v); }
  addFloat64(key: string, v: number): this { return this.add(key, GgufValueType.FLOAT64, v); }
  addArray(key: string, type: GgufValueType, values: GgufArray['values']): this {
    return this.add(key, GgufValueType.ARRAY, { type, values });
  }

  /** Declares a tensor; its data is supplied later, in declaration order. */
  addTensor(name: string, ne: readonly number[], type: GgmlType): GgufTensorInfo {
    if (this.names.has(name)) throw new Error(`duplicate tensor name ${name}`);
    if (ne.length < 1 || ne.length > 4) throw new Error(`tensor ${name}: ${ne.length} dimensions (1..4 allowed)`);
    const nbytes = ggmlTensorBytes(type, ne);
    const info: GgufTensorInfo = { name, ne: [...ne], type, offset: this.dataSize, nbytes };
    this.names.add(name);
    this.tensors.push(info);
    this.dataSize += alignUp(nbytes, this.align);
    return info;
  }

  /** Everything before the data section: header, metadata, tensor infos, padding. */
  headerBytes(): Buffer {
    let size = 4 + 4 + 8 + 8;
    for (const kv of this.kvs) size += kv.encoded.length;
    for (const t of this.tensors) size += 8 + Buffer.byteLength(t.name, 'utf8') + 4 + 8 * t.ne.length + 4 + 8;
    const total = this.tensors.length > 0 ? alignUp(size, this.align) : size;
    const enc = new Encoder(Buffer.alloc(total));
    enc.u32(GGUF_MAGIC);
    enc.u32(GGUF_VERSION);
    enc.u64(this.tensors.length);
    enc.u64(this.kvs.length);
    for (const kv of this.kvs) {
      kv.encoded.copy(enc.buf, enc.pos);
      enc.pos += kv.encoded.length;
    }
    for (const t of this.tensors) {
      enc.str(t.name);
      enc.u32(t.ne.length);
      for (const d of t.ne) enc.u64(d);
      enc.u32(t.type);
      enc.u64(t.offset);
    }
    if (enc.pos !== size) throw new Error(`internal: header size ${enc.pos} != ${size}`);
    return enc.buf;
  }

  /** Total file size in bytes once all tensor data is written. */
  fileSize(): number {
    return this.headerBytes().length + this.dataSize;
  }

  /** Bytes of tensor data including padding (the data section). */
  get dataBytes(): number { return this.dataSize; }

  /**
   * Streams the file to `path`. `data(info, index)` is called once per tensor, in order, and must return
   * exactly `info.nbytes` bytes. On any error the partial file is removed.
   */
  async writeFile(path: string, data: (info: GgufTensorInfo, index: number) => TensorData | Promise<TensorData>): Promise<number> {
    const fh = await open(path, 'w');
    let written = 0;
    try {
      const header = this.headerBytes();
      await fh.write(header);
      written += header.length;
      for (let i = 0; i < this.tensors.length; i++) {
        const info = this.tensors[i];
        let n = 0;
        for await (const chunk of asChunks(await data(info, i))) {
          n += chunk.length;
          if (n > info.nbytes) throw new Error(`tensor ${info.name}: more than ${info.nbytes} bytes of data`);
          await fh.write(chunk);
        }
        if (n !== info.nbytes) throw new Error(`tensor ${info.name}: got ${n} bytes of data, expected ${info.nbytes}`);
        const pad = alignUp(n, this.align) - n;
        if (pad > 0) await fh.write(Buffer.alloc(pad));
        written += n + pad;
      }
    } catch (err) {
      await fh.close();
      await unlink(path).catch(() => undefined);
      throw err;
    }
    await fh.close();
    return written;
  }

  /** The whole file in memory (for small files); `data[i]` is tensor i's bytes. */
  toBuffer(data: readonly Uint8Array[]): Buffer {
    if (data.length !== this.tensors.length) throw new Error(`got data for ${data.length} tensors, declared ${this.tensors.length}`);
    const header = this.headerBytes();
    const out = Buffer.alloc(header.length + this.dataSize);
    header.copy(out, 0);
    this.tensors.forEach((info, i) => {
      if (data[i].length !== info.nbytes) throw new Error(`tensor ${info.name}: got ${data[i].length} bytes, expected ${info.nbytes}`);
      out.set(data[i], header.length + info.offset);
    });
    return out;
  }

  private setAlignment(type: GgufValueType, value: GgufValue): void {
    if (type !== GgufValueType.UINT32 || typeof value !== 'number') throw new Error('general.alignment must be a UINT32');
    if (value <= 0 || (value & (value - 1)) !== 0) throw new Error(`general.alignment ${value} is not a power of two`);
    if (this.tensors.length > 0) throw new Error('general.alignment must be set before tensors are added');
    this.align = value;
  }
}

async function* asChunks(data: TensorData): AsyncIterable<Uint8Array> {
  if (data instanceof Uint8Array) {
    yield data;
    return;
  }
  for await (const chunk of data as AsyncIterable<Uint8Array>) {
    if (!(chunk instanceof Uint8Array)) throw new Error('tensor data chunks must be Uint8Array');
    yield chunk;
  }
}
