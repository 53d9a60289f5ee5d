// Splits a GGUF file the way llama.cpp's gguf-split does: <prefix>-0000k-of-0000N.gguf, the first file holding
// every metadata key, each file split.no / split.count / split.tensors.count (and nothing else: the other files
// align their data at the default 32 bytes), the tensors dealt out in order, their bytes copied unchanged.
// For tests of split loading (Spindle's and llama.cpp's own, which reads these files too).
import { readFileSync, writeFileSync } from 'node:fs';
import { ggmlTensorBytes, type GgmlType } from '../../lib/gguf/constants.js';
import { splitPath } from '../../lib/gguf/split.js';

const SCALAR_BYTES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
const STRING = 8, ARRAY = 9;
interface Tensor { name: string; info: Buffer; dims: number[]; type: number; offset: number; bytes: number }

/** Splits `src` into `n` files named `<prefix>-0000k-of-0000n.gguf`; returns their paths, first to last. */
export function splitGguf(src: string, prefix: string, n: number): string[] {
  const buf = readFileSync(src);
  let pos = 0;
  const u32 = () => { const v = buf.readUInt32LE(pos); pos += 4; return v; };
  const u64 = () => { const v = Number(buf.readBigUInt64LE(pos)); pos += 8; return v; };
  const skipValue = (type: number): void => {
    if (type === STRING) {
      const len = u64();  // read first: `pos += u64()` would add to the pos before the read
      pos += len;
      return;
    }
    if (type === ARRAY) {
      const item = u32(), count = u64();
      for (let i = 0; i < count; i++) skipValue(item);
      return;
    }
    pos += SCALAR_BYTES[type];
  };
  if (u32() !== 0x46554747) throw new Error(`${src}: not a GGUF file`);
  const version = u32(), nTensors = u64(), nKv = u64();
  const kvs: Buffer[] = [];
  let alignmentKv: Buffer | null = null;
  for (let i = 0; i < nKv; i++) {
    const start = pos;
    const key = buf.toString('utf8', pos + 8, pos + 8 + Number(buf.readBigUInt64LE(pos)));
    pos += 8 + Buffer.byteLength(key);
    skipValue(u32());
    kvs.push(buf.subarray(start, pos));
    if (key === 'general.alignment') alignmentKv = buf.subarray(start, pos);
  }
  const alignment = alignmentKv ? alignmentKv.readUInt32LE(alignmentKv.length - 4) : 32;
  const tensors: Tensor[] = [];
  for (let i = 0; i < nTensors; i++) {
    const start = pos;
    const len = u64();
    const name = buf.toString('utf8', pos, pos + len);
    pos += len;
    const dims = Array.from({ length: u32() }, () => u64());
    const type = u32();
    const offset = u64();
    const bytes = ggmlTensorBytes(type as GgmlType, dims);
    tensors.push({ name, info: buf.subarray(start, pos), dims, type, offset, bytes });
  }
  const dataStart = Math.ceil(pos / alignment) * alignment;
  const per = Math.ceil(tensors.length / n);
  const paths: string[] = [];
  for (let k = 0; k < n; k++) {
    const mine = tensors.slice(k * per, (k + 1) * per);
    const kv = (key: string, type: number, value: Buffer): Buffer => {
      const head = Buffer.alloc(8 + Buffer.byteLength(key) + 4);
      head.writeBigUInt64LE(BigInt(Buffer.byteLength(key)), 0);
      head.write(key, 8);
      head.writeUInt32LE(type, 8 + Buffer.byteLength(key));
      return Buffer.concat([head, value]);
    };
    const u16v = (v: number) => { const b = Buffer.alloc(2); b.writeUInt16LE(v); return b; };
    const i32v = (v: number) => { const b = Buffer.alloc(4); b.writeInt32LE(v); return b; };
    const myKvs = [...(k === 0 ? kvs : []), kv('split.no', 2, u16v(k)), kv('split.count', 2, u16v(n)),
      kv('split.tensors.count', 5, i32v(tensors.length))];
    const align = k === 0 ? alignment : 32;
    const header = Buffer.alloc(24);
    header.writeUInt32LE(0x46554747, 0);
    header.writeUInt32LE(version, 4);
    header.writeBigUInt64LE(BigInt(mine.length), 8);
    header.writeBigUInt64LE(BigInt(myKvs.length), 16);
    const infos: Buffer[] = [];
    const data: Buffer[] = [];
    let offset = 0;
    for (const t of mine) {
      const info = Buffer.from(t.info);
      info.writeBigUInt64LE(BigInt(offset), info.length - 8);  // the offset is the info's last field
      infos.push(info);
      const padded = Math.ceil(t.bytes / align) * align;
      const bytes = Buffer.alloc(padded);
      buf.copy(bytes, 0, dataStart + t.offset, dataStart + t.offset + t.bytes);
      data.push(bytes);
      offset += padded;
    }
    const head = Buffer.concat([header, ...myKvs, ...infos]);
    const pad = Buffer.alloc(Math.ceil(head.length / align) * align - head.length);
    const path = splitPath(prefix, k, n);
    writeFileSync(path, Buffer.concat([head, pad, ...data]));
    paths.push(path);
  }
  return paths;
}
