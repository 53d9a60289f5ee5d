// OpenAI's `response_format` as a sampling-parameter constraint: `text` (none), `json_object` (any JSON
// object), `json_schema` ({ name, schema, strict }: the schema, enforced whatever `strict` says, as vLLM does).
// Invariant: anything else is a 400 naming response_format and the supported types; the schema itself is
// checked by the normalizer's compiler (lib/constraints.ts), whose errors name it as response_format.
import { badRequest } from './api-error.js';

/** Extra normalizer input for `rf` (an empty object for none / text). */
export function responseFormatSampling(rf: unknown): Record<string, unknown> {
  if (rf === undefined || rf === null) return {};
  const type = (rf as { type?: unknown }).type;
  if (type === 'text') return {};
  if (type === 'json_object') return { 'response_format.json_object': true };
  if (type === 'json_schema') {
    const js = (rf as { json_schema?: unknown }).json_schema;
    if (typeof js !== 'object' || js === null || Array.isArray(js)) {
      throw badRequest("response_format.json_schema must be an object { name, schema, strict }", 'response_format');
    }
    const { name, schema } = js as { name?: unknown; schema?: unknown };
    if (typeof name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(name)) {
      throw badRequest('response_format.json_schema.name must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -', 'response_format');
    }
    // OpenAI: a missing schema means any JSON object.
    return schema === undefined || schema === null ? { 'response_format.json_object': true } : { 'response_format.json_schema': schema };
  }
  throw badRequest(`response_format.type must be 'text', 'json_object' or 'json_schema' (got ${JSON.stringify(type)})`, 'response_format');
}
