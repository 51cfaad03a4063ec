// Reads turnstream's /api/chat with the AI SDK's own client code, for each major of the `ai`
// package (installed side by side as ai5, ai6, ai7): its DefaultChatTransport, its
// readUIMessageStream, and its AbstractChat (what useChat wraps) for approvals, resume and stop.
// Every chunk the server sent is validated with the package's own uiMessageChunkSchema, and
// any key that version's schema does not define is refused too.
//
// Env: TS_URL (server), TS_KEY (API key), TS_MODELS (JSON: scenario name -> model, and
// `live_gate`: the FIFO that holds the `live` scenario's stream half way until it is opened),
// TS_VERSIONS (optional, e.g. "6,7"), TS_MEDIA (JSON: base64 of a PNG and a PDF). Prints one JSON
// line per check; exits non-zero on the first failure.
import { writeFileSync } from 'node:fs';


const base = process.env.TS_URL;
const key = process.env.TS_KEY;
const models = JSON.parse(process.env.TS_MODELS);
const versions = (process.env.TS_VERSIONS || '5,6,7').split(',').map(Number);
const media = JSON.parse(process.env.TS_MEDIA); // base64 of a small PNG and PDF: {png, pdf}

// The keys each chunk type may carry, per major, as each package's chunk schema defines them.
const KEYS5 = {
  'start': ['messageId', 'messageMetadata'],
  'finish': ['finishReason', 'messageMetadata'],
  'start-step': [],
  'finish-step': [],
  'text-start': ['id', 'providerMetadata'],
  'text-delta': ['id', 'delta', 'providerMetadata'],
  'text-end': ['id', 'providerMetadata'],
  'reasoning-start': ['id', 'providerMetadata'],
  'reasoning-delta': ['id', 'delta', 'providerMetadata'],
  'reasoning-end': ['id', 'providerMetadata'],
  'tool-input-start': ['toolCallId', 'toolName', 'providerExecuted', 'dynamic'],
  'tool-input-delta': ['toolCallId', 'inputTextDelta'],
  'tool-input-available': ['toolCallId', 'toolName', 'input', 'providerExecuted', 'providerMetadata', 'dynamic'],
  'tool-output-available': ['toolCallId', 'output', 'providerExecuted', 'dynamic', 'preliminary'],
  'tool-input-error': ['toolCallId', 'toolName', 'input', 'providerExecuted', 'providerMetadata', 'dynamic',
    'errorText'],
  'tool-output-error': ['toolCallId', 'errorText', 'providerExecuted', 'dynamic'],
  'error': ['errorText'],
  'data-*': ['id', 'data', 'transient'],
};
const TOOL_META = ['providerMetadata', 'toolMetadata'];
const KEYS6 = {
  ...KEYS5,
  'tool-input-start': [...KEYS5['tool-input-start'], 'inputEncoding', ...TOOL_META, 'title'],
  'tool-input-available': [...KEYS5['tool-input-available'], 'toolMetadata', 'title'],
  'tool-input-error': [...KEYS5['tool-input-error'], 'toolMetadata', 'title'],
  'tool-output-available': [...KEYS5['tool-output-available'], ...TOOL_META],
  'tool-output-error': [...KEYS5['tool-output-error'], ...TOOL_META],
  'tool-approval-request': ['approvalId', 'toolCallId', 'approvalDescriptor', 'inputSchemaInput', 'signature'],
  'tool-output-denied': ['toolCallId'],
};
const KEYS7 = {
  ...KEYS6,
  'text-end': [...KEYS6['text-end'], 'citations'],
  'tool-approval-request': [...KEYS6['tool-approval-request'], 'reason', 'isAutomatic'],
  'tool-approval-response': ['approvalId', 'approved', 'reason', 'providerExecuted', 'providerMetadata'],
  'reset-step': [],
};
const KEYS = { 5: KEYS5, 6: KEYS6, 7: KEYS7 };

function expect(cond, what, detail) {
  if (!cond) throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

// Records every chunk of every response (the body is teed before the SDK reads it).
class Recorder {
  constructor(v, sdk) {
    this.v = v;
    this.sdk = sdk;
    this.pending = [];
    this.fetch = async (url, init) => {
      const res = await fetch(url, init);
      if (res.status !== 200 || !res.body) return res;
      const [mine, theirs] = res.body.tee();
      this.pending.push(new Response(mine).text().catch((e) => ({ broken: String(e) })));
      return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
  }

  // Every chunk recorded so far, validated; clears the record.
  async chunks() {
    const bodies = await Promise.all(this.pending);
    this.pending = [];
    const schema = this.sdk.uiMessageChunkSchema();
    const out = [];
    for (const body of bodies) {
      expect(typeof body === 'string', 'a response broke off', body);
      const frames = body.split('\n\n').filter((f) => f.startsWith('data: '));
      for (const f of frames) {
        const payload = f.slice('data: '.length);
        if (payload === '[DONE]') continue;
        const chunk = JSON.parse(payload);
        const checked = await schema.validate(chunk);
        expect(checked.success, `v${this.v} schema rejects ${chunk.type}`, [chunk, String(checked.error)]);
        const allowed = KEYS[this.v][chunk.type.startsWith('data-') ? 'data-*' : chunk.type];
        expect(allowed, `v${this.v} has no chunk type`, chunk.type);
        for (const k of Object.keys(chunk)) {
          expect(k === 'type' || allowed.includes(k), `v${this.v} ${chunk.type} has an unknown key`, k);
        }
        out.push(chunk);
      }
      expect(frames.at(-1) === 'data: [DONE]', 'stream ends with [DONE]', frames.at(-1));
    }
    return out;
  }
}

function user(text) {
  return { id: `u-${Math.random().toString(36).slice(2)}`, role: 'user', parts: [{ type: 'text', text }] };
}

const textOf = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
const chat = (name) => `${name}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;

function headers(v) {
  return { Authorization: `Bearer ${key}`, 'X-AI-SDK-Version': String(v) };
}

// `path`: the route with any query; `hdrs`: the request's headers (the version's by default).
function transport(ctx, body, { path = '/api/chat', hdrs = headers(ctx.v) } = {}) {
  return new ctx.sdk.DefaultChatTransport({ api: `${base}${path}`, headers: hdrs, body, fetch: ctx.rec.fetch });
}

async function send(ctx, chatId, messages, body, how) {
  return transport(ctx, body, how).sendMessages({
    chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
  });
}

async function finalMessage(ctx, stream, message) {
  let last;
  for await (const m of ctx.sdk.readUIMessageStream({ stream, message, terminateOnError: true })) last = m;
  return last;
}

// A Chat as useChat holds it, with plain arrays for state.
function newChat(ctx, id, body, init = {}) {
  const changed = [];
  const state = {
    status: 'ready',
    error: undefined,
    messages: init.messages ?? [],
    set(messages) { this.messages = messages; changed.splice(0).forEach((w) => w()); },
    pushMessage(m) { this.set(this.messages.concat(m)); },
    popMessage() { this.set(this.messages.slice(0, -1)); },
    replaceMessage(i, m) { this.set([...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]); },
    snapshot: (x) => structuredClone(x),
  };
  const finished = [];
  const waiters = [];
  const data = [];
  class TestChat extends ctx.sdk.AbstractChat {}
  const c = new TestChat({
    id,
    transport: transport(ctx, body),
    state,
    sendAutomaticallyWhen: init.sendAutomaticallyWhen,
    onFinish: (e) => { finished.push(e); waiters.splice(0).forEach((w) => w()); },
    onError: () => {},
    onData: (part) => data.push(part),
  });
  c.finished = finished;
  c.data = data; // the data parts onData saw (transient ones included)
  // Resolves once `n` responses have finished.
  c.finishedCount = (n) => new Promise((resolve) => {
    const check = () => (finished.length >= n ? resolve() : waiters.push(check));
    check();
  });
  c.state_ = state;
  // Resolves once the messages satisfy `cond` (checked on every change the Chat makes).
  c.messagesWhere = (cond) => new Promise((resolve) => {
    const check = () => (cond(state.messages) ? resolve() : changed.push(check));
    check();
  });
  return c;
}

function sameParts(message) {
  // No part twice: text and reasoning by content, tools by call id.
  const seen = new Set();
  for (const p of message.parts) {
    if (p.type === 'step-start') continue;
    const k = p.toolCallId ? `tool:${p.toolCallId}` : `${p.type}:${p.text ?? JSON.stringify(p.data ?? p)}`;
    expect(!seen.has(k), 'a part appears twice', message.parts);
    seen.add(k);
  }
}

async function api(path, init = {}) {
  const res = await fetch(`${base}${path}`, { ...init, headers: { ...headers(5), 'content-type': 'application/json', ...(init.headers ?? {}) } });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

// ---------------------------------------------------------------------------------------

async function textCheck(ctx) {
  const u = user('hello sdk');
  const msg = await finalMessage(ctx, await send(ctx, chat('text'), [u], { model: models.echo, toolset: 'none' }));
  expect(textOf(msg) === 'You said: hello sdk', 'text', msg);
  const chunks = await ctx.rec.chunks();
  expect(chunks[0].type === 'start' && chunks.at(-1).type === 'finish', 'start/finish', chunks.map((c) => c.type));
  if (ctx.v >= 6) expect(chunks.at(-1).finishReason === 'stop', 'finishReason', chunks.at(-1));
  await ctx.sdk.validateUIMessages({ messages: [u, msg] });
  return chunks.length;
}

async function serverToolCheck(ctx) {
  const u = user('compute');
  const msg = await finalMessage(ctx, await send(ctx, chat('tool'), [u], { model: models.chain, toolset: 'calculator' }));
  const calls = msg.parts.filter((p) => p.type === 'tool-calculator');
  expect(calls.length === 2, 'two calculator calls', msg.parts);
  expect(calls.every((p) => p.state === 'output-available'), 'outputs', calls);
  expect(calls.map((p) => p.output).join(',') === '5,50', 'output values', calls);
  expect(textOf(msg).endsWith('The result is 50.'), 'final text', msg);
  expect(msg.parts.filter((p) => p.type === 'step-start').length === 3, 'three steps', msg.parts);
  await ctx.sdk.validateUIMessages({ messages: [u, msg] });
  return (await ctx.rec.chunks()).length;
}

async function clientToolCheck(ctx) {
  const id = chat('client');
  const body = {
    model: models.client, toolset: 'none',
    client_tools: [{ name: 'get_location', description: 'Where the user is.' }],
  };
  const u = user('where am I?');
  const first = await finalMessage(ctx, await send(ctx, id, [u], body));
  const call = first.parts.find((p) => p.type === 'tool-get_location');
  expect(call && call.state === 'input-available', 'client call waits', first.parts);
  expect(call.input.precision === 'city', 'input', call);
  // The browser ran the tool: the part now carries its output, and the chat is sent again.
  const answered = { ...first, parts: first.parts.map((p) => (p === call ? { ...p, state: 'output-available', output: 'Lyon' } : p)) };
  const second = await finalMessage(ctx, await send(ctx, id, [u, answered], body), answered);
  expect(second.id === first.id, 'same assistant message continues', [first.id, second.id]);
  expect(textOf(second).endsWith('You are in Lyon.'), 'answer uses the result', second.parts);
  sameParts(second);
  await ctx.sdk.validateUIMessages({ messages: [u, second] });
  return (await ctx.rec.chunks()).length;
}

// Approve, then deny with a reason. 6 and 7: approval parts in the messages, sent by the Chat
// itself (sendAutomaticallyWhen). 5 has none: the app sends the chat again with the decision
// in the request body (`approvals`).
async function approvalCheck(ctx) {
  const body = { model: models.approve, toolset: 'none' };
  const outcomes = [];
  for (const [approved, reason] of [[true, undefined], [false, 'not to Ada, not today']]) {
    const id = chat('approve');
    const c = newChat(ctx, id, body, ctx.v >= 6
      ? { sendAutomaticallyWhen: ctx.sdk.lastAssistantMessageIsCompleteWithApprovalResponses } : {});
    await c.sendMessage({ text: 'send the note' });
    let msg = c.state_.messages.at(-1);
    const part = msg.parts.find((p) => p.type === 'tool-send_note');
    if (ctx.v >= 6) {
      expect(part && part.state === 'approval-requested', 'approval requested', msg.parts);
      expect(part.approval.id === part.toolCallId, 'approval id', part);
      await c.addToolApprovalResponse({ id: part.approval.id, approved, reason });
      await c.finishedCount(2);
    } else {
      expect(part && part.state === 'input-available', 'call waits', msg.parts);
      // Sent again with the decision in the body; the same assistant message continues.
      await c.sendMessage(undefined, { body: { approvals: [{ tool_use_id: part.toolCallId, approved, reason }] } });
    }
    expect(c.status === 'ready', 'chat ready', [c.status, c.error && String(c.error)]);
    msg = c.state_.messages.at(-1);
    const done = msg.parts.find((p) => p.type === 'tool-send_note');
    const text = textOf(msg);
    if (approved) {
      expect(done.state === 'output-available' && done.output === 'note to ada sent: hi', 'approved call ran', done);
      expect(text.endsWith('Outcome: note to ada sent: hi'), 'answer after approval', text);
    } else {
      expect(done.state === (ctx.v >= 6 ? 'output-denied' : 'output-error'), 'denied call', done);
      if (ctx.v >= 6) expect(done.approval.reason === reason, 'reason kept in the part', done);
      expect(text.includes('denied') && text.includes(reason), 'the model read the reason', text);
    }
    expect(c.state_.messages.length === 2, 'one user and one assistant message', c.state_.messages);
    sameParts(msg);
    await ctx.sdk.validateUIMessages({ messages: c.state_.messages });
    outcomes.push(done.state);
  }
  return (await ctx.rec.chunks()).length;
}

// Reading a stream until a condition holds, then dropping it (the tab closes).
async function readUntil(ctx, chatId, messages, body, cond) {
  const ac = new AbortController();
  const stream = await transport(ctx, body).sendMessages({
    chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: ac.signal,
  });
  const reader = stream.getReader();
  const seen = [];
  for (;;) {
    const { value, done } = await reader.read();
    expect(!done, 'stream ended before the condition', seen);
    seen.push(value);
    if (cond(value)) break;
  }
  ac.abort();
  await reader.cancel().catch(() => {});
  ctx.rec.pending = []; // that response was cut short on purpose
  return seen;
}

async function resumeCheck(ctx) {
  const id = chat('resume');
  const body = { model: models.slow, toolset: 'none' };
  const u = user('tell me a long story');
  const seen = await readUntil(ctx, id, [u], body, (c) => c.type === 'start');
  // The page reloads: a new Chat with what it had stored, resuming on mount.
  const c = newChat(ctx, id, body, { messages: [u] });
  await c.resumeStream();
  expect(c.status === 'ready' && !c.error, 'resumed', [c.status, c.error && String(c.error)]);
  const msg = c.state_.messages.at(-1);
  expect(c.state_.messages.length === 2 && msg.role === 'assistant', 'one assistant message', c.state_.messages);
  expect(msg.id === seen[0].messageId, 'same message id', [msg.id, seen[0]]);
  expect(textOf(msg) === models.slow_text, 'whole text once', textOf(msg));
  expect(msg.parts.filter((p) => p.type === 'text').length === 1, 'one text part', msg.parts);
  sameParts(msg);
  await ctx.sdk.validateUIMessages({ messages: c.state_.messages });
  // Nothing open any more: resuming again finds nothing (204), and the Chat stays as it is.
  await c.resumeStream();
  expect(c.state_.messages.length === 2 && c.status === 'ready', 'nothing to resume', c.state_.messages.length);
  return (await ctx.rec.chunks()).length;
}

async function stopCheck(ctx) {
  const id = chat('stop');
  const body = { model: models.slow, toolset: 'none' };
  const c = newChat(ctx, id, body);
  const sent = c.sendMessage({ text: 'a long story, then stop' });
  // The response has started (its first chunk names the assistant message): the turn runs.
  await c.messagesWhere((ms) => ms.at(-1)?.role === 'assistant');
  await c.stop(); // the SDK aborts its fetch: the server's turn goes on until told
  await sent;
  const r = await api(`/api/chat/${id}/stop`, { method: 'POST' });
  expect(r.status === 200 && r.body.status === 'cancelled', 'stopped', r);
  const sid = c.state_.messages.at(-1).metadata.session_id;
  const s = await api(`/api/sessions/${sid}`);
  expect(s.body.turns.at(-1).status === 'cancelled', 'turn cancelled', s.body.turns.at(-1).status);
  const again = await fetch(`${base}/api/chat/${id}/stream`, { headers: headers(ctx.v) });
  expect(again.status === 204, 'nothing to resume after a stop', again.status);
  const none = await api(`/api/chat/${id}/stop`, { method: 'POST' });
  expect(none.status === 204, 'nothing to stop', none.status);
  ctx.rec.pending = [];
  return 0;
}

// Token by token: the `live` scenario's provider stream waits at its gate after its first
// text delta, and the gate opens only once the client's message shows that text. 5 sends no
// version header, as a default useChat transport does.
async function liveCheck(ctx) {
  const u = user('stream it live');
  const hdrs = ctx.v === 5 ? { Authorization: `Bearer ${key}` } : headers(ctx.v);
  const stream = await send(ctx, chat('live'), [u], { model: models.live, toolset: 'none' }, { hdrs });
  let seenWhileHeld;
  let last;
  let failBound;
  const bound = new Promise((_, reject) => {
    failBound = setTimeout(() => reject(new Error('no text reached the client while the provider was held')), 30000);
  });
  const read = (async () => {
    for await (const m of ctx.sdk.readUIMessageStream({ stream, terminateOnError: true })) {
      last = m;
      if (seenWhileHeld === undefined && textOf(m)) {
        seenWhileHeld = textOf(m);
        clearTimeout(failBound);
        writeFileSync(models.live_gate, 'open'); // the provider goes on only now
      }
    }
  })();
  await Promise.race([read, bound]);
  expect(seenWhileHeld && models.live_text.startsWith(seenWhileHeld) && seenWhileHeld !== models.live_text,
    'a first piece of text arrived before the provider step finished', seenWhileHeld);
  expect(textOf(last) === models.live_text, 'then the whole text', textOf(last));
  expect(last.parts.filter((p) => p.type === 'text').length === 1, 'one text part', last.parts);
  const chunks = await ctx.rec.chunks();
  expect(chunks.filter((c) => c.type === 'text-delta').length > 1, 'delta by delta', chunks);
  await ctx.sdk.validateUIMessages({ messages: [u, last] });
  return chunks.length;
}

async function stepRestarted(ctx, msg) {
  const meta = msg.metadata;
  const events = await fetch(`${base}/api/sessions/${meta.session_id}/turns/${meta.turn_id}/events`,
    { headers: headers(ctx.v) });
  return (await events.text()).includes('event: step_restart');
}

const discarded = (p) => p.providerMetadata?.turnstream?.discarded === true;
// What a page shows of a 5 or 6 message (docs/aisdk.md): the parts of a broken attempt hidden.
const kept = (p) => !discarded(p) && !(p.state === 'output-error' && p.errorText?.startsWith('discarded:'));

// A step restarted after its stream broke half way, streamed live: 7 takes the broken attempt
// back with reset-step; 5 and 6 end its text part marked as discarded, and the step starts
// again with a part of its own.
async function restartCheck(ctx) {
  const u = user('tell me, despite a broken stream');
  // Each version has its own scenario file: the fault hits the first attempt of its step once.
  const model = models[`restart_${ctx.v}`];
  const msg = await finalMessage(ctx, await send(ctx, chat('restart'), [u], { model, toolset: 'none' }));
  const chunks = await ctx.rec.chunks();
  expect(await stepRestarted(ctx, msg), 'the step was restarted', msg.metadata);
  const types = chunks.map((c) => c.type);
  expect(types.indexOf('text-delta') < types.indexOf(ctx.v >= 7 ? 'reset-step' : 'finish-step'),
    'text streamed before the break', types);
  const texts = msg.parts.filter((p) => p.type === 'text');
  if (ctx.v >= 7) {
    expect(types.includes('reset-step'), 'reset-step sent', types);
    expect(texts.length === 1, 'one text part', msg.parts);
    expect(msg.parts.filter((p) => p.type === 'step-start').length === 1, 'one step', msg.parts);
  } else {
    expect(!types.includes('reset-step'), 'no reset-step before 7', types);
    const [broken, kept] = texts;
    expect(texts.length === 2 && discarded(broken) && !discarded(kept), 'the broken part, marked, then the answer',
      msg.parts);
    expect(broken.state === 'done' && models.restart_text.startsWith(broken.text) && broken.text !== kept.text,
      'the broken attempt ended where it broke', broken);
    expect(msg.parts.filter((p) => p.type === 'step-start').length === 2, 'the step started again', msg.parts);
  }
  expect(msg.parts.filter((p) => p.type === 'text' && !discarded(p)).map((p) => p.text).join('') === models.restart_text,
    'the text once', msg.parts);
  sameParts(msg);
  await ctx.sdk.validateUIMessages({ messages: [u, msg] });
  return chunks.length;
}

// The break comes in a tool call's arguments, after the step's text has ended. 5 and 6: the text
// ends marked, the call ends as an input error (marked), and the answer's own parts follow.
async function restartToolCheck(ctx) {
  const u = user('add, despite a broken stream');
  const model = models[`restart_tool_${ctx.v}`];
  const msg = await finalMessage(ctx, await send(ctx, chat('restart-tool'), [u], { model, toolset: 'calculator' }));
  const chunks = await ctx.rec.chunks();
  expect(await stepRestarted(ctx, msg), 'the step was restarted', msg.metadata);
  const calls = msg.parts.filter((p) => p.type === 'tool-calculator');
  const shown = msg.parts.filter(kept);
  if (ctx.v >= 7) {
    expect(shown.length === msg.parts.length, 'reset-step left nothing to hide', msg.parts);
  } else {
    const broken = chunks.find((c) => c.type === 'tool-input-error');
    expect(broken && broken.providerMetadata?.turnstream?.discarded && broken.input === '{"expr',
      'the streaming call ended as an input error', broken);
    expect(calls.length === 2 && calls[0].state === 'output-error' && calls[0].rawInput === '{"expr',
      'the broken call is an error part', calls);
    expect(msg.parts.filter((p) => p.type === 'text' && discarded(p)).map((p) => p.text).join('') === 'Let me add.',
      'the text that had ended before the break is marked', msg.parts);
  }
  const shownCalls = shown.filter((p) => p.type === 'tool-calculator');
  expect(shownCalls.length === 1 && shownCalls[0].state === 'output-available' && shownCalls[0].output === '5',
    'one call ran', shown);
  expect(shown.filter((p) => p.type === 'text').map((p) => p.text).join('|') === 'Let me add.|The result is 5.',
    'the text once', shown);
  sameParts({ ...msg, parts: shown });
  await ctx.sdk.validateUIMessages({ messages: [u, msg] });
  return chunks.length;
}

// `?steps=whole`: each step's parts once its stream has ended, so the broken attempt never
// reaches the client, in any version.
async function wholeStepsCheck(ctx) {
  const u = user('whole steps, despite a broken stream');
  const model = models[`restart_whole_${ctx.v}`];
  const msg = await finalMessage(ctx, await send(ctx, chat('whole'), [u], { model, toolset: 'none' },
    { path: '/api/chat?steps=whole' }));
  const chunks = await ctx.rec.chunks();
  expect(await stepRestarted(ctx, msg), 'the step was restarted', msg.metadata);
  const types = chunks.map((c) => c.type);
  expect(!types.includes('reset-step'), 'nothing to take back', types);
  expect(types.filter((t) => t === 'text-start').length === 1, 'the broken attempt was never sent', types);
  expect(textOf(msg) === models.restart_text, 'the text once', textOf(msg));
  expect(msg.parts.filter((p) => p.type === 'text').length === 1, 'one text part', msg.parts);
  expect(msg.parts.filter((p) => p.type === 'step-start').length === 1, 'one step', msg.parts);
  await ctx.sdk.validateUIMessages({ messages: [u, msg] });
  return chunks.length;
}

async function notebookCheck(ctx) {
  if (!models.notebook) return 0;
  const u = user('make a cell');
  const msg = await finalMessage(ctx, await send(ctx, chat('nb'), [u], { model: models.notebook, toolset: 'notebook' }));
  const cells = msg.parts.filter((p) => p.type === 'data-notebook-cell');
  expect(cells.length === 1 && cells[0].data.change === 'cell_created', 'one cell part', msg.parts);
  expect(cells[0].id === cells[0].data.cell.id && cells[0].data.cell.code === 'x = 1 + 1', 'cell part', cells[0]);
  await ctx.sdk.validateUIMessages({ messages: [u, msg] });
  return (await ctx.rec.chunks()).length;
}

// A message with an image and a PDF, as `sendMessage({ text, files })` sends them (data: URLs).
async function fileCheck(ctx) {
  const c = newChat(ctx, chat('files'), { model: models.echo, toolset: 'none' });
  const files = [
    { type: 'file', mediaType: 'image/png', filename: 'dot.png', url: `data:image/png;base64,${media.png}` },
    { type: 'file', mediaType: 'application/pdf', filename: 'page.pdf', url: `data:application/pdf;base64,${media.pdf}` },
  ];
  await c.sendMessage({ text: 'what is in these?', files });
  expect(c.status === 'ready', 'chat ready', [c.status, c.error && String(c.error)]);
  const msg = c.state_.messages.at(-1);
  expect(textOf(msg) === 'You said: what is in these?', 'answer', msg);
  await ctx.sdk.validateUIMessages({ messages: c.state_.messages });
  const sid = msg.metadata.session_id;
  const session = (await api(`/api/sessions/${sid}`)).body;
  const userBlock = session.turns[0].blocks.find((b) => b.type === 'user');
  expect(userBlock.attachments.map((a) => a.media_type).join() === 'image/png,application/pdf', 'stored', userBlock);
  return (await ctx.rec.chunks()).length;
}

// A message while the turn waits for an approval: onData sees the outcome, the turn goes on in a new
// assistant message that read the message as the denial's reason.
async function steeringCheck(ctx) {
  const c = newChat(ctx, chat('steer'), { model: models.approve, toolset: 'none' });
  await c.sendMessage({ text: 'send the note' });
  expect(c.state_.messages.at(-1).parts.some((p) => p.type === 'tool-send_note'), 'call waits', c.state_.messages);
  await c.sendMessage({ text: 'no, ask Bob instead' });
  expect(c.status === 'ready', 'chat ready', [c.status, c.error && String(c.error)]);
  const steer = c.data.find((d) => d.type === 'data-turnstream-steering');
  expect(steer && steer.data.outcome === 'denied' && steer.data.tool_use_ids.length === 1, 'outcome', c.data);
  const roles = c.state_.messages.map((m) => m.role).join();
  expect(roles === 'user,assistant,user,assistant', 'messages', c.state_.messages);
  const text = textOf(c.state_.messages.at(-1));
  expect(text.includes('denied') && text.includes('no, ask Bob instead'), 'the model read the reason', text);
  expect(c.state_.messages.at(-1).parts.every((p) => !p.type.startsWith('data-')), 'transient', c.state_.messages);
  await ctx.sdk.validateUIMessages({ messages: c.state_.messages });
  return (await ctx.rec.chunks()).length;
}

const CHECKS = [textCheck, liveCheck, serverToolCheck, clientToolCheck, approvalCheck, resumeCheck, stopCheck,
  restartCheck, restartToolCheck, wholeStepsCheck, notebookCheck, fileCheck, steeringCheck];

for (const v of versions) {
  const sdk = await import(`ai${v}`);
  const ctx = { v, sdk, rec: new Recorder(v, sdk) };
  for (const check of CHECKS) {
    const chunks = await check(ctx);
    console.log(JSON.stringify({ ok: true, version: v, check: check.name, chunks }));
  }
}
