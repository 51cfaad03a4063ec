// Reads turnstream's POST /api/chat with the AI SDK's own client code and fails on any
// chunk the SDK would reject, or any key its chunk schema does not define.
//
// Env: TS_URL (server), TS_KEY (API key), TS_MODELS (JSON: scenario name -> model).
// Prints one JSON line per check; exits non-zero on the first failure.
import { DefaultChatTransport, readUIMessageStream, validateUIMessages } from 'ai';

const base = process.env.TS_URL;
const key = process.env.TS_KEY;
const models = JSON.parse(process.env.TS_MODELS);

// Keys of every chunk type (the AI SDK's strict chunk schema); anything else is a violation.
const KEYS = {
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
  'tool-output-available': ['toolCallId', 'output', 'providerExecuted', 'dynamic'],
  'tool-output-error': ['toolCallId', 'errorText', 'providerExecuted', 'dynamic'],
  'error': ['errorText'],
};

function strict(log) {
  return new TransformStream({
    transform(chunk, controller) {
      const allowed = KEYS[chunk.type];
      if (!allowed) throw new Error(`unknown chunk type ${chunk.type}`);
      for (const k of Object.keys(chunk)) {
        if (k !== 'type' && !allowed.includes(k)) throw new Error(`chunk ${chunk.type} has unknown key ${k}`);
      }
      log.push(chunk.type);
      controller.enqueue(chunk);
    },
  });
}

async function send(chatId, messages, body, log) {
  const transport = new DefaultChatTransport({
    api: `${base}/api/chat`,
    headers: { Authorization: `Bearer ${key}` },
    body,
  });
  const stream = await transport.sendMessages({
    chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
  });
  return stream.pipeThrough(strict(log));
}

async function finalMessage(stream, message) {
  let last;
  for await (const m of readUIMessageStream({ stream, message, terminateOnError: true })) last = m;
  return last;
}

function user(text) {
  return { id: `u-${Math.random().toString(36).slice(2)}`, role: 'user', parts: [{ type: 'text', text }] };
}

function expect(cond, what, detail) {
  if (!cond) throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

function textOf(message) {
  return message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
}

const chat = (name) => `${name}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;

async function textCheck() {
  const log = [];
  const u = user('hello sdk');
  const msg = await finalMessage(await send(chat('text'), [u], { model: models.echo, toolset: 'none' }, log));
  expect(textOf(msg) === 'You said: hello sdk', 'text', msg);
  expect(log[0] === 'start' && log.at(-1) === 'finish', 'start/finish', log);
  await validateUIMessages({ messages: [u, msg] });
  return { check: 'text', chunks: log.length };
}

async function serverToolCheck() {
  const log = [];
  const u = user('compute');
  const msg = await finalMessage(await send(chat('tool'), [u], { model: models.chain, toolset: 'calculator' }, log));
  const calls = msg.parts.filter((p) => p.type === 'tool-calculator');
  expect(calls.length === 2, 'two calculator calls', msg.parts);
  expect(calls.every((p) => p.state === 'output-available'), 'outputs', calls);
  expect(calls.map((p) => p.output).join(',') === '5,50', 'output values', calls);
  expect(textOf(msg).endsWith('The result is 50.'), 'final text', msg);
  expect(msg.parts.filter((p) => p.type === 'step-start').length === 3, 'three steps', msg.parts);
  await validateUIMessages({ messages: [u, msg] });
  return { check: 'server-tool', chunks: log.length };
}

async function clientToolCheck() {
  const id = chat('client');
  const body = {
    model: models.client, toolset: 'none',
    client_tools: [{ name: 'get_location', description: 'Where the user is.' }],
  };
  const log = [];
  const u = user('where am I?');
  const first = await finalMessage(await send(id, [u], body, log));
  const call = first.parts.find((p) => p.type === 'tool-get_location');
  expect(call && call.state === 'input-available', 'client call waits', first.parts);
  expect(call.input.precision === 'city', 'input', call);
  // The browser ran the tool: the part now carries its output, and the chat is sent again.
  const answered = { ...first, parts: first.parts.map((p) => (p === call ? { ...p, state: 'output-available', output: 'Lyon' } : p)) };
  const log2 = [];
  const second = await finalMessage(await send(id, [u, answered], body, log2), answered);
  expect(second.id === first.id, 'same assistant message continues', [first.id, second.id]);
  expect(textOf(second).endsWith('You are in Lyon.'), 'answer uses the result', second.parts);
  await validateUIMessages({ messages: [u, second] });
  return { check: 'client-tool', chunks: log.length + log2.length };
}

for (const check of [textCheck, serverToolCheck, clientToolCheck]) {
  const result = await check();
  console.log(JSON.stringify({ ok: true, ...result }));
}
