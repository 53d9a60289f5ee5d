// POST /v1/responses (OpenAI's Responses API, as vLLM and Ollama serve it): `input` (a string or items) after
// `instructions`, continuing the stored conversation of `previous_response_id`; function tools with tool_choice,
// `text.format` (json_object / json_schema), max_output_tokens, temperature, top_p (and vLLM's sampling extras);
// non-streamed, or streamed as named SSE events (response.created, response.in_progress, the items' events,
// then response.completed / response.incomplete); a reasoning model's thinking is a `reasoning` item first
// (reasoning.effort: its chat template variables, as the chat route's reasoning_effort). `background: true` answers
// at once with the response `queued` and generates on, whether or not the client stays (OpenAI's background mode):
// GET /v1/responses/{id} polls it (in_progress with the output so far, then its final status), POST
// /v1/responses/{id}/cancel stops it (`cancelled`); with `stream: true` it answers with its events as they come, and
// GET /v1/responses/{id}?stream=true&starting_after=N sends them again after event N, then on live (a client that
// lost its stream resumes it). GET returns a stored response, or one still being generated
// (in_progress), DELETE forgets a stored one; `item_reference` input items name output items of stored responses.
// Runner mode: `model` names a store model, as in the chat route (a background response keeps it loaded).
// Invariants: the prompt is the chat route's for the same messages (same template, tools, Modelfile); stored
// responses are in memory (the newest 1000, at most 64 MiB; `store: false` keeps none; a background response is
// stored however it ends, a foreground one unless aborted); a streamed response's
// items equal the non-streamed ones (responses/output.ts); a failure after the stream started is one `error`
// event.
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ChatMessage } from '../../../chat/template.js';
import { ApiError, badRequest, toApiError } from '../../api-error.js';
import { chatPrompt } from '../../chat-prompt.js';
import { chatLogprobs } from '../../logprobs.js';
import { cacheSaltOf, checkModel, checkPrompt, Job, jobUsage, samplingFrom } from '../../generation.js';
import { openAiDefaults, useModel } from '../../model-use.js';
import { responseFormatSampling } from '../../response-format.js';
import { responsesSchema } from '../../schemas.js';
import { SseStream } from '../../sse.js';
import { chatTools, useToolGrammar } from '../../tool-calls.js';
import { constrainAfterReasoning, reasoningParserOf, reasoningTokenCount, requestReasoning, thinkingKwargs } from '../../reasoning.js';
import { chatToolChoiceOf, chatToolsOf, inputItems, itemsToMessages, responseFormatOf } from '../../responses/input.js';
import { ResponseEventLog } from '../../responses/events.js';
import { OutputAssembler, responseId, type Emit, type Item } from '../../responses/output.js';
import { ResponseStore } from '../../responses/store.js';

interface ResponsesBody extends Record<string, unknown> {
  model?: string | null;
  input: unknown;
  instructions?: string | null;
  previous_response_id?: string | null;
  store?: boolean | null;
  stream?: boolean | null;
  max_output_tokens?: number | null;
  tools?: unknown[] | null;
  tool_choice?: unknown;
  parallel_tool_calls?: boolean | null;
  text?: { format?: unknown } | null;
  metadata?: Record<string, string> | null;
  reasoning?: { effort?: string | null } | null;
  background?: boolean | null;
  include?: unknown;
  top_logprobs?: number | null;
}

// `include` values with nothing to add here: encrypted reasoning (reasoning items carry their text; clients that
// send it with store: false, as Codex does, send the items back and they are accepted), and the outputs of tools this
// server has no items of.
const INCLUDE_NOTHING_TO_ADD = ['reasoning.encrypted_content', 'message.input_image.image_url', 'computer_call_output.output.image_url',
  'file_search_call.results', 'web_search_call.results', 'web_search_call.action.sources', 'code_interpreter_call.outputs'];

// The output text's token logprobs (each output_text part's and output_text delta's `logprobs`).
const INCLUDE_LOGPROBS = 'message.output_text.logprobs';

/** The top alternatives per output token asked for: null (no logprobs) unless include asks for them, as vLLM reads it;
 *  top_logprobs (0..20, the schema checks) alternatives each. */
function outputLogprobsOf(body: ResponsesBody): number | null {
  const included = Array.isArray(body.include) && body.include.includes(INCLUDE_LOGPROBS);
  return included ? body.top_logprobs ?? 0 : null;
}

function refuseUnsupported(body: ResponsesBody): void {
  if (body.include != null) {
    if (!Array.isArray(body.include)) throw badRequest('include must be an array of strings', 'include');
    body.include.forEach((v, i) => {
      if (typeof v !== 'string' || !(v === INCLUDE_LOGPROBS || INCLUDE_NOTHING_TO_ADD.includes(v))) {
        throw badRequest(`include[${i}]: ${JSON.stringify(v)} is not one of ${[INCLUDE_LOGPROBS, ...INCLUDE_NOTHING_TO_ADD].join(', ')}`, 'include');
      }
    });
  }
  if (body.background === true && body.store === false) {
    throw badRequest('background: a background response is stored (to be polled with GET /v1/responses/{id}); store: false cannot be used with it', 'background');
  }
  if (body.conversation != null) throw badRequest('conversation: the Conversations API is not supported; use previous_response_id', 'conversation', 'unsupported_parameter');
  if (body.prompt != null) throw badRequest('prompt: stored prompt templates are not supported', 'prompt', 'unsupported_parameter');
  if (body.n != null && body.n !== 1) throw badRequest('n: a response has one output; send n requests for more', 'n');
  if (body.prompt_logprobs != null) throw badRequest('prompt_logprobs is not available on /v1/responses (use /v1/completions or /v1/chat/completions)', 'prompt_logprobs', 'unsupported_parameter');
}

/** The message the conversation records for a response's output items. */
function outputMessages(items: readonly Item[]): ChatMessage[] {
  return itemsToMessages(items.map((i) => (i.type === 'message' ? { type: 'message', role: 'assistant', content: i.content } : i)), 'output');
}

/** A response still being generated: what GET shows of it, (background ones) how to cancel it, (streamed background ones) its events. */
interface ActiveResponse {
  snapshot(): Record<string, unknown>;
  cancel: (() => Promise<Record<string, unknown>>) | null;
  events: ResponseEventLog | null;
}

/** Streams `log`'s events after sequence number `after` to the client (named SSE events), until the log ends or the client goes. */
async function streamEvents(reply: FastifyReply, log: ResponseEventLog, after: number): Promise<void> {
  const gone = new AbortController();
  if (reply.raw.destroyed) gone.abort();  // left before this ran
  else reply.raw.once('close', () => gone.abort());
  const sse = new SseStream(reply);
  for await (const e of log.after(after, gone.signal)) sse.event(e.type, e.data);
  sse.end(false);
}

/** GET's starting_after: absent -1 (every event), else a sequence number. */
function startingAfterOf(value: string | undefined): number {
  if (value === undefined) return -1;
  if (!/^\d{1,15}$/.test(value)) throw badRequest(`starting_after must be a non-negative integer, an event's sequence_number (got ${JSON.stringify(value)})`, 'starting_after');
  return Number(value);
}

const notFound = (id: string): ApiError => new ApiError(404, `Response with id '${id}' not found`, { param: 'response_id', code: 'not_found' });

/** The last event of a streamed response of this (finished) status: completed, incomplete, or failed for anything
 * else (a cancelled one has none: its stream just ends, as OpenAI's). */
function terminalEvent(status: unknown): string {
  return status === 'completed' ? 'response.completed' : status === 'incomplete' ? 'response.incomplete' : 'response.failed';
}

export default async function responsesRoute(app: FastifyInstance): Promise<void> {
  const store = new ResponseStore();
  const active = new Map<string, ActiveResponse>();

  app.post('/v1/responses', { schema: { body: responsesSchema } }, async (request, reply) => {
    const body = request.body as ResponsesBody;
    refuseUnsupported(body);
    const use = await useModel(app, reply, body.model, { single: (e) => checkModel(e, body.model), adapters: true });
    const { engine, name: model } = use;
    const { tokenizer, info } = await engine.ready();
    const previous = body.previous_response_id ? store.get(body.previous_response_id) : null;
    if (body.previous_response_id && !previous) {
      throw new ApiError(404, `Previous response with id '${body.previous_response_id}' not found`, { param: 'previous_response_id', code: 'previous_response_not_found' });
    }
    // item_reference: an output item of a stored response, by id (the AI SDK's OpenAI provider sends them)
    const input = itemsToMessages(inputItems(body.input).map((item, i) => {
      if (item.type !== 'item_reference') return item;
      const found = typeof item.id === 'string' ? store.item(item.id) : undefined;
      if (!found) throw badRequest(`input[${i}]: item_reference: no stored item with id ${JSON.stringify(item.id)}`, `input[${i}]`);
      return found.type === 'message' ? { type: 'message', role: 'assistant', content: found.content } : found;
    }));
    const conversation = [...(previous?.conversation ?? []), ...input];
    const messages: ChatMessage[] = [...(body.instructions ? [{ role: 'system' as const, content: body.instructions }] : []), ...conversation];

    const topLogprobs = outputLogprobsOf(body);
    const params = samplingFrom({ ...body, max_tokens: body.max_output_tokens }, {
      ...(topLogprobs !== null ? { logprobs: topLogprobs } : {}), ...responseFormatSampling(responseFormatOf(body.text)),
    }, openAiDefaults(use));
    const template = use.model?.manifest.template ?? info.chatTemplate;
    const tools = chatTools(engine, template, chatToolsOf(body.tools),
      chatToolChoiceOf(body.tool_choice), body.parallel_tool_calls);
    useToolGrammar(params, tools, 'text.format');
    const effort = body.reasoning?.effort ?? null;
    if (effort !== null && !reasoningParserOf(engine, template)) {
      throw badRequest('reasoning.effort: this model does not reason (it has no reasoning parser; see --reasoning-parser)', 'reasoning', 'unsupported_parameter');
    }
    const { ids, prompt, images, text } = await chatPrompt(engine, tokenizer, messages,
      { addGenerationPrompt: true, tools: tools?.templateTools, chatTemplateKwargs: thinkingKwargs(effort, undefined) }, 'input', use.model?.manifest ?? null);
    const reasoning = requestReasoning(engine, template, text);
    constrainAfterReasoning(params, reasoning);
    checkPrompt(ids, params, info.maxModelLen, tokenizer.vocabSize, 'input', 'max_output_tokens', images > 0);

    const id = responseId('resp');
    const createdAt = Math.floor(Date.now() / 1000);
    const storeIt = body.store !== false, background = body.background === true;
    const response = (status: string, output: Item[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
      id, object: 'response', created_at: createdAt, status, background, error: null, incomplete_details: null,
      instructions: body.instructions ?? null, max_output_tokens: body.max_output_tokens ?? null, model, output,
      parallel_tool_calls: body.parallel_tool_calls ?? true, previous_response_id: body.previous_response_id ?? null,
      reasoning: { effort, summary: null }, store: storeIt, temperature: params.temperature, text: body.text ?? { format: { type: 'text' } },
      tool_choice: body.tool_choice ?? 'auto', tools: body.tools ?? [], top_logprobs: body.top_logprobs ?? 0, top_p: params.topP,
      truncation: 'disabled', usage: null,
      user: body.user ?? null, metadata: body.metadata ?? {}, ...extra,
    });
    if (background && reply.raw.destroyed) throw badRequest('the client closed the connection before the background response was queued');
    const job = new Job(engine, [prompt], params, app.metrics, { lora: use.lora, cacheSalt: cacheSaltOf(body) });
    if (!background) job.bindToReply(reply);
    const r = job.requests[0];
    let cancelled = false;
    // a streamed background response's events (background with stream: true), kept with it for GET ?stream=true
    const events = background && body.stream === true ? new ResponseEventLog() : null;

    /**
     * The finished response object: completed, incomplete (max_output_tokens), cancelled (a background response's
     * cancel) or, for a request aborted before it finished (client gone, server draining), failed; stored unless
     * store: false, or a foreground response failed.
     */
    const finished = (assembler: OutputAssembler, reason: string, outputIds: readonly number[]): Record<string, unknown> => {
      const outputTokens = outputIds.length;
      const reasoningTokens = reasoning ? reasoningTokenCount(tokenizer, reasoning, assembler.reasoned, outputIds) : 0;
      const usage = jobUsage(job, outputTokens);
      // a cancel that came after the last step leaves the response as it ended
      const wasCancelled = cancelled && reason === 'abort';
      const incomplete = reason === 'length', aborted = reason === 'abort' && !wasCancelled;
      const status = wasCancelled ? 'cancelled' : aborted ? 'failed' : incomplete ? 'incomplete' : 'completed';
      const done = response(status, assembler.items, {
        incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
        error: aborted ? { code: 'request_aborted', message: 'the request was aborted before it finished' } : null,
        usage: {
          input_tokens: usage.prompt_tokens, input_tokens_details: { cached_tokens: usage.prompt_tokens_details.cached_tokens },
          output_tokens: usage.completion_tokens, output_tokens_details: { reasoning_tokens: reasoningTokens }, total_tokens: usage.total_tokens,
        },
      });
      if (storeIt && (!aborted || background)) {
        store.put(id, { response: done, conversation: [...conversation, ...outputMessages(assembler.items)], events: events ?? undefined });
      }
      return done;
    };

    /** The request's deltas into `assembler` up to the finishing one: the finished response. */
    const generate = async (assembler: OutputAssembler, onTokens?: () => void): Promise<Record<string, unknown>> => {
      const outputIds: number[] = [];
      for await (const d of job.deltas(r)) {
        if (d.tokenIds.length > 0) onTokens?.();  // not an abort's empty last delta
        outputIds.push(...d.tokenIds);
        assembler.push(d.text, topLogprobs !== null ? chatLogprobs(d.logprobs, tokenizer).content : undefined);
        if (d.finishReason !== null) {
          assembler.finish(d.finishReason !== 'stop');
          return finished(assembler, d.finishReason, outputIds);
        }
      }
      // the deltas ended without a finish (the engine never does this today): as an abort
      assembler.finish(true);
      return finished(assembler, 'abort', outputIds);
    };

    if (background) {
      // answered now (streamed: the events as they come, from response.created / response.queued on); generated
      // on, the output so far visible to GET, until it ends (stored whatever the end)
      const emit: Emit | null = events ? (type, fields) => { events.push(type, fields); } : null;
      const assembler = new OutputAssembler(tools?.parser ?? null, emit, reasoning);
      let status = 'queued';
      emit?.('response.created', { response: response('queued', []) });
      emit?.('response.queued', { response: response('queued', []) });
      const started = (): void => {
        if (status !== 'queued') return;
        status = 'in_progress';
        emit?.('response.in_progress', { response: response('in_progress', []) });
      };
      // the terminal event of a streamed one (a cancelled response has none in OpenAI's events: its stream just ends),
      // then the stored entry counted again with it
      const ended = (done: Record<string, unknown>): Record<string, unknown> => {
        if (done.status !== 'cancelled') emit?.(terminalEvent(done.status), { response: done });
        if (events) store.refresh(id);
        return done;
      };
      const work = (async (): Promise<Record<string, unknown>> => {
        try {
          return ended(await generate(assembler, started));
        } catch (e) {
          const err = toApiError(e);
          try {
            assembler.finish(true);  // held-back text flushed, the open item closed (incomplete)
          } catch { /* the items stay as they were */ }
          const failed = response('failed', assembler.items, { error: { code: err.code ?? 'server_error', message: err.message } });
          store.put(id, { response: failed, conversation: [...conversation, ...outputMessages(assembler.items)], events: events ?? undefined });
          return ended(failed);
        } finally {
          events?.end();
          active.delete(id);
        }
      })();
      active.set(id, {
        snapshot: () => response(status, structuredClone(assembler.items)),
        cancel: () => {
          cancelled = true;
          job.abort();
          return work;
        },
        events,
      });
      void work.catch(() => {});  // it never rejects (failures are stored); kept from being an unhandled rejection
      use.hold(work);
      if (events) return streamEvents(reply, events, -1);  // the client may leave: the response goes on
      return response('queued', []);
    }

    if (body.stream !== true) {
      try {
        if (storeIt) active.set(id, { snapshot: () => response('in_progress', []), cancel: null, events: null });
        // the deltas the streamed path takes, so the items (and which tokens' logprobs a message holds) are the same
        return await generate(new OutputAssembler(tools?.parser ?? null, null, reasoning));
      } finally {
        active.delete(id);
      }
    }

    const sse = new SseStream(reply);
    let seq = 0;
    const emit: Emit = (type, fields) => sse.event(type, { type, sequence_number: seq++, ...fields });
    const assembler = new OutputAssembler(tools?.parser ?? null, emit, reasoning);
    try {
      if (storeIt) active.set(id, { snapshot: () => response('in_progress', structuredClone(assembler.items)), cancel: null, events: null });
      emit('response.created', { response: response('in_progress', []) });
      emit('response.in_progress', { response: response('in_progress', []) });
      const done = await generate(assembler);
      emit(terminalEvent(done.status), { response: done });
    } catch (e) {
      job.abort();
      const err = toApiError(e);
      emit('error', { code: err.code ?? 'server_error', message: err.message, param: err.param ?? null });
    } finally {
      active.delete(id);
    }
    sse.end(false);
  });

  app.get('/v1/responses/:id', async (request, reply) => {
    const { id } = request.params as { id: string };
    const { stream, starting_after: startingAfter } = request.query as { stream?: string; starting_after?: string };
    if (stream === 'true') {
      // a streamed background response's events again, after starting_after, then live until it ends
      const after = startingAfterOf(startingAfter);
      if (!active.has(id) && !store.get(id)) throw notFound(id);
      const events = active.get(id)?.events ?? store.get(id)?.events;
      if (!events) throw badRequest(`stream: response '${id}' was not created with background: true and stream: true, so its events were not kept; GET it without stream`, 'stream');
      return streamEvents(reply, events, after);
    }
    const running = active.get(id);
    if (running) return running.snapshot();
    const entry = store.get(id);
    if (!entry) throw notFound(id);
    return entry.response;
  });

  app.post('/v1/responses/:id/cancel', async (request) => {
    const { id } = request.params as { id: string };
    const running = active.get(id);
    const stored = running ? undefined : store.get(id);
    if (!running && !stored) throw notFound(id);
    const response = running ? running.snapshot() : stored!.response;
    if (response.background !== true) throw badRequest(`Cannot cancel a synchronous response (only responses created with background: true can be cancelled)`, 'response_id');
    // a finished background response is returned as it ended (cancel is idempotent)
    return running?.cancel ? await running.cancel() : response;
  });

  app.delete('/v1/responses/:id', async (request) => {
    const { id } = request.params as { id: string };
    if (active.has(id)) {
      throw badRequest(`Response with id '${id}' is still being generated; cancel it (background) or wait for it to finish`, 'response_id');
    }
    if (!store.delete(id)) throw notFound(id);
    return { id, object: 'response', deleted: true };
  });
}
