// Ollama's blob upload (runner mode), what the `ollama create` CLI does before /api/create with `files` / `adapters`:
// HEAD /api/blobs/sha256:<hex> answers 200 when the store holds that blob, else 404; POST /api/blobs/sha256:<hex>
// streams the body into the store, hashing it on the way: 201 when its SHA-256 is the digest (200, body unread, when
// the blob is there already), else 400 saying both digests, and nothing is kept.
// Invariants: the body is never held in memory (an encapsulated raw-stream parser, no body limit: a model file is
// gigabytes), written to a temporary name and renamed only once verified; a client that goes away, or sends nothing
// for UPLOAD_IDLE_MS, leaves no file; a failure to write (disk full, permissions) is the server's 5xx, a broken upload
// the client's 400.
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, rmSync, renameSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance } from 'fastify';
import { ApiError, badRequest } from '../../api-error.js';
import { blobDigest } from './create.js';
import { runnerStore } from './manage.js';

const UPLOAD_IDLE_MS = 120_000; // an upload that sends nothing for this long is dropped (the server has no whole-request limit in runner mode)

/** A failed write of the store's own (not the client's upload breaking off). */
function serverSide(e: unknown): ApiError | null {
  const code = (e as { code?: string }).code ?? '';
  if (code === 'ENOSPC' || code === 'EDQUOT') return new ApiError(507, `the store has no space left for this blob: ${(e as Error).message}`, { code: 'insufficient_storage' });
  if (['EACCES', 'EPERM', 'EROFS', 'EIO', 'EMFILE', 'ENFILE'].includes(code)) return new ApiError(500, `the store could not write the blob: ${(e as Error).message}`);
  return null;
}

export default async function blobRoutes(app: FastifyInstance): Promise<void> {
  app.removeAllContentTypeParsers(); // this plugin only: bodies stay streams, whatever their type
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  const digestOf = (params: unknown): { digest: string; name: string } => {
    const name = (params as { digest: string }).digest;
    const digest = blobDigest(name);
    if (digest === null) throw badRequest(`invalid digest '${name}': expected sha256:<64 hex digits>`, 'digest');
    return { digest, name };
  };

  app.head('/api/blobs/:digest', async (request, reply) => {
    const store = runnerStore(app, '/api/blobs');
    const { digest, name } = digestOf(request.params);
    if (!existsSync(store.blobPath(digest))) throw new ApiError(404, `blob "${name}" not found`, { code: 'not_found' });
    return reply.code(200).send();
  });

  app.post('/api/blobs/:digest', async (request, reply) => {
    const store = runnerStore(app, '/api/blobs');
    const { digest, name } = digestOf(request.params);
    const blob = store.blobPath(digest);
    const body = (request.body ?? request.raw) as Readable | IncomingMessage;
    if (existsSync(blob)) {
      body.resume(); // not needed: the store has it
      return reply.code(200).send();
    }
    const tmp = `${blob}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    const hash = createHash('sha256');
    const hashing = new Transform({ transform(chunk: Buffer, _enc, cb) { hash.update(chunk); cb(null, chunk); } });
    const socket = request.raw.socket;
    const onIdle = (): void => { request.raw.destroy(new Error(`nothing received for ${UPLOAD_IDLE_MS / 1000} s`)); };
    socket.setTimeout(UPLOAD_IDLE_MS);
    socket.once('timeout', onIdle);
    try {
      mkdirSync(store.blobs, { recursive: true });
      await pipeline(body, hashing, createWriteStream(tmp));
    } catch (e) {
      rmSync(tmp, { force: true });
      throw serverSide(e) ?? badRequest(`the upload of ${name} did not complete: ${(e as Error).message}`, 'body');
    } finally {
      socket.setTimeout(0); // the connection may carry other requests
      socket.off('timeout', onIdle);
    }
    const got = `sha256:${hash.digest('hex')}`;
    if (got !== `sha256:${digest.slice('sha256-'.length)}`) {
      rmSync(tmp, { force: true });
      throw badRequest(`digest mismatch, expected "${name}", got "${got}"`, 'digest');
    }
    renameSync(tmp, blob);
    return reply.code(201).send();
  });
}
