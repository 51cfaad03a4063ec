// Reads turnstream's POST /api/ag-ui with the AG-UI protocol's own packages: @ag-ui/client's
// HttpAgent runs the threads (its verifier refuses any event out of order), and every event
// the server sent is validated with @ag-ui/core's schemas, keys included.
//
// Env: TS_URL (server), TS_KEY (API key), TS_MODELS (JSON: scenario name -> model, and
// `live_gate`: the FIFO that holds the `live` scenario's stream half way until it is opened).
// Prints one JSON line per check; exits non-zero on the first failure.
import { writeFileSync } from 'node:fs';
import { HttpAgent } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';

const base = process.env.TS_URL;
const key = process.env.TS_KEY;
const models = JSON.parse(process.env.TS_MODELS);

function expect(cond, what, detail) {
  if (!cond) throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

// The keys each event type may carry, read from @ag-ui/core's own schemas.
const KEYS = {};
for (const option of EventSchemas.options) {
  const shape = option.shape;
  for (const t of shape.type._zod.def.values) KEYS[t] = Object.keys(shape);
}

// Records every event of every response (the body is teed before the agent reads it).
class Recorder {
  constructor() {
    this.pending = [];
    this.fetch = async (url, init) => {
      const res = await fetch(url, init);
      if (res.status !== 200 || !res.body) return res;
      const [mine, theirs] = res.body.tee();
      this.pending.push(new Response(mine).text().catch((e) => ({ broken: String(e) })));
      return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
  }

  // The events of each response recorded so far, validated; clears the record.
  async runs() {
    const bodies = await Promise.all(this.pending);
    this.pending = [];
    return bodies.map((body) => {
      expect(typeof body === 'string', 'a response broke off', body);
      return body.split('\n\n').filter((f) => f.startsWith('data: ')).map((f) => {
        const event = JSON.parse(f.slice('data: '.length));
        const checked = EventSchemas.safeParse(event);
        expect(checked.success, `schema rejects ${event.type}`, [event, checked.error?.issues]);
        expect(KEYS[event.type], 'unknown event type', event.type);
        for (const k of Object.keys(event)) expect(KEYS[event.type].includes(k), `${event.type} has an unknown key`, k);
        return event;
      });
    });
  }
}

const rec = new Recorder();
const thread = (name) => `${name}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
const uid = () => Math.random().toString(36).slice(2);

function agent(threadId, messages = [], path = '/api/ag-ui') {
  const a = new HttpAgent({
    url: `${base}${path}`, headers: { Authorization: `Bearer ${key}` }, threadId, fetch: rec.fetch,
    initialMessages: messages,
  });
  return a;
}

function say(a, text) {
  a.addMessage({ id: `u-${uid()}`, role: 'user', content: text });
}

const types = (events) => events.map((e) => e.type);
const finished = (events) => events.at(-1);
const assistantText = (a) => a.messages.filter((m) => m.role === 'assistant' && m.content).map((m) => m.content).join('');

// ---------------------------------------------------------------------------------------

async function textCheck() {
  const a = agent(thread('text'));
  say(a, 'hello agent');
  await a.runAgent({ forwardedProps: { model: models.think, toolset: 'none' } });
  const [run] = await rec.runs();
  expect(types(run)[0] === 'RUN_STARTED' && finished(run).type === 'RUN_FINISHED', 'run frame', types(run));
  expect(finished(run).outcome.type === 'success', 'success', finished(run));
  expect(types(run).includes('REASONING_MESSAGE_CONTENT'), 'reasoning streamed', types(run));
  expect(a.messages.some((m) => m.role === 'reasoning' && m.content === 'Let me think about that.'), 'reasoning kept', a.messages);
  expect(assistantText(a) === 'Thought about: hello agent', 'text', a.messages);
  expect(finished(run).usage[0].outputTokens > 0, 'usage', finished(run));
  return run.length;
}

async function clientToolCheck() {
  const a = agent(thread('client'));
  const tools = [{ name: 'get_location', description: 'Where the user is.',
    parameters: { type: 'object', properties: { precision: { type: 'string' } } } }];
  say(a, 'where am I?');
  await a.runAgent({ tools, forwardedProps: { model: models.client, toolset: 'none' } });
  let [run] = await rec.runs();
  const end = finished(run);
  expect(end.outcome.type === 'success' && end.outcome.pendingToolCallIds?.length === 1, 'a frontend call waits', end);
  const callId = end.outcome.pendingToolCallIds[0];
  const call = a.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === callId);
  expect(call && call.function.name === 'get_location' && JSON.parse(call.function.arguments).precision === 'city',
    'the call is in the thread', a.messages);
  // The frontend ran the tool: its result rides the next run's messages.
  a.addMessage({ id: `t-${uid()}`, role: 'tool', toolCallId: callId, content: 'Lyon' });
  await a.runAgent({ tools });
  [run] = await rec.runs();
  expect(finished(run).outcome.type === 'success' && !finished(run).outcome.pendingToolCallIds, 'done', finished(run));
  expect(!types(run).includes('TOOL_CALL_START'), 'the call is not sent again', types(run));
  expect(assistantText(a).endsWith('You are in Lyon.'), 'the answer uses the result', a.messages);
  return run.length;
}

async function approvalCheck() {
  let count = 0;
  for (const [approved, reason] of [[true, undefined], [false, 'not to Ada, not today']]) {
    const a = agent(thread('approve'));
    say(a, 'send the note');
    await a.runAgent({ forwardedProps: { model: models.approve, toolset: 'none' } });
    let [run] = await rec.runs();
    const end = finished(run);
    expect(end.outcome.type === 'interrupt' && end.outcome.interrupts.length === 1, 'interrupt', end);
    const [interrupt] = end.outcome.interrupts;
    expect(interrupt.reason === 'tool_call' && interrupt.toolCallId === interrupt.id, 'a tool interrupt', interrupt);
    expect(a.pendingInterrupts.length === 1, 'the agent holds the interrupt', a.pendingInterrupts);
    // A run that neither answers it nor brings a new user message is refused, in the stream, as AG-UI asks.
    const refused = await fetch(`${base}/api/ag-ui`, {
      method: 'POST', headers: { Authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ threadId: a.threadId, runId: `r-${uid()}`, tools: [], context: [], messages: a.messages }),
    });
    const refusal = (await refused.text()).split('\n\n').filter(Boolean).map((f) => JSON.parse(f.slice(6)));
    refusal.forEach((e) => expect(EventSchemas.safeParse(e).success, 'refusal events', e));
    expect(refusal.at(-1).type === 'RUN_ERROR' && refusal.at(-1).code === 'interrupts_unanswered', 'refused', refusal);
    // The answer resumes the thread in a new run.
    const payload = approved ? { approved } : { approved, reason };
    await a.runAgent({ resume: [{ interruptId: interrupt.id, status: 'resolved', payload }] });
    [run] = await rec.runs();
    expect(finished(run).outcome.type === 'success', 'resumed run succeeds', finished(run));
    const result = run.find((e) => e.type === 'TOOL_CALL_RESULT');
    expect(result && result.toolCallId === interrupt.toolCallId, 'the call gets its result in the resumed run', run);
    const text = assistantText(a);
    if (approved) {
      expect(result.content === 'note to ada sent: hi', 'the approved call ran', result);
      expect(text.endsWith('Outcome: note to ada sent: hi'), 'answer', text);
    } else {
      expect(result.content.includes('denied') && result.content.includes(reason), 'denial with its reason', result);
      expect(text.includes(reason), 'the model read the reason', text);
    }
    expect(a.pendingInterrupts.length === 0, 'no interrupt left', a.pendingInterrupts);
    count += run.length;
  }
  return count;
}

// A new user message instead of an answer to the interrupt: the call is denied with the message
// as the reason, and this run streams the turn going on. HttpAgent refuses to run while it holds
// interrupts that the run's resume leaves out, so the client lets go of them first.
async function steerCheck() {
  const a = agent(thread('steer'));
  say(a, 'send the note');
  await a.runAgent({ forwardedProps: { model: models.approve, toolset: 'none' } });
  let [run] = await rec.runs();
  const [interrupt] = finished(run).outcome.interrupts;
  const reason = 'not to Ada; ask me first';
  say(a, reason);
  a.pendingInterrupts = [];
  await a.runAgent();
  [run] = await rec.runs();
  const steering = run.find((e) => e.type === 'CUSTOM');
  expect(types(run)[1] === 'CUSTOM' && steering.name === 'turnstream-steering', 'the outcome first', types(run));
  expect(steering.value.outcome === 'denied' && steering.value.tool_use_ids[0] === interrupt.toolCallId,
    'the call was denied', steering);
  const result = run.find((e) => e.type === 'TOOL_CALL_RESULT');
  expect(result && result.toolCallId === interrupt.toolCallId && result.content.endsWith(reason), 'the denial', result);
  expect(finished(run).outcome.type === 'success', 'the run goes on to the end', finished(run));
  expect(assistantText(a).endsWith(result.content), 'the model read the message', a.messages);
  return run.length;
}

// Token by token: the `live` scenario's provider stream waits at its gate after its first
// text delta, and the gate opens only once the agent's message holds that text.
async function liveCheck() {
  const a = agent(thread('live'));
  say(a, 'stream it live');
  let seenWhileHeld;
  let failBound;
  const bound = new Promise((_, reject) => {
    failBound = setTimeout(() => reject(new Error('no text reached the agent while the provider was held')), 30000);
  });
  const run = a.runAgent({ forwardedProps: { model: models.live, toolset: 'none' } }, {
    onTextMessageContentEvent: ({ textMessageBuffer, event }) => {
      if (seenWhileHeld !== undefined) return;
      seenWhileHeld = textMessageBuffer + event.delta;
      clearTimeout(failBound);
      writeFileSync(models.live_gate, 'open'); // the provider goes on only now
    },
  });
  await Promise.race([run, bound]);
  expect(seenWhileHeld && models.live_text.startsWith(seenWhileHeld) && seenWhileHeld !== models.live_text,
    'a first piece of text arrived before the provider step finished', seenWhileHeld);
  expect(assistantText(a) === models.live_text, 'then the whole text', a.messages);
  const [events] = await rec.runs();
  expect(types(events).filter((t) => t === 'TEXT_MESSAGE_CONTENT').length > 1, 'delta by delta', types(events));
  return events.length;
}

async function stepRestarted(run) {
  const { session_id: sid, turn_id: tid } = run[0].metadata;
  const events = await fetch(`${base}/api/sessions/${sid}/turns/${tid}/events`, { headers: { Authorization: `Bearer ${key}` } });
  return (await events.text()).includes('event: step_restart');
}

// A step restarted after its stream broke half way, streamed live: what was open ends, and a
// MESSAGES_SNAPSHOT holding the thread's true messages takes the broken attempt's out.
async function restartCheck() {
  const a = agent(thread('restart'));
  say(a, 'despite a broken stream');
  const before = structuredClone(a.messages);
  await a.runAgent({ forwardedProps: { model: models.restart, toolset: 'none' } });
  const [run] = await rec.runs();
  expect(await stepRestarted(run), 'the step was restarted', run[0]);
  const t = types(run);
  const snapshot = run.find((e) => e.type === 'MESSAGES_SNAPSHOT');
  expect(snapshot && t.indexOf('TEXT_MESSAGE_CONTENT') < t.indexOf('TEXT_MESSAGE_END')
    && t.indexOf('TEXT_MESSAGE_END') < t.indexOf('MESSAGES_SNAPSHOT'), 'streamed, ended, then the snapshot', t);
  expect(JSON.stringify(snapshot.messages) === JSON.stringify(before), 'the snapshot holds the true messages', snapshot);
  expect(t.filter((x) => x === 'TEXT_MESSAGE_START').length === 2, 'the step streamed again', t);
  const texts = a.messages.filter((m) => m.role === 'assistant');
  expect(texts.length === 1 && texts[0].content === models.restart_text, 'the text once', a.messages);
  expect(new Set(a.messages.map((m) => m.id)).size === a.messages.length, 'no message twice', a.messages);
  return run.length;
}

// The answer's stream breaks after a tool call ran: the snapshot holds the user's message, the
// first step's text, the call and its result, as the agent had built them from the events.
async function restartAfterToolCheck() {
  const a = agent(thread('restart-tool'));
  say(a, 'add, despite a broken stream');
  let atSnapshot;
  await a.runAgent({ forwardedProps: { model: models.restart_after_tool, toolset: 'calculator' } }, {
    onMessagesSnapshotEvent: ({ messages }) => { atSnapshot = structuredClone(messages); },
  });
  const [run] = await rec.runs();
  expect(await stepRestarted(run), 'the step was restarted', run[0]);
  const snapshot = run.find((e) => e.type === 'MESSAGES_SNAPSHOT');
  const mine = atSnapshot.slice(0, snapshot.messages.length);
  expect(JSON.stringify(snapshot.messages) === JSON.stringify(mine), 'the snapshot is what the agent had built',
    [snapshot.messages, atSnapshot]);
  expect(snapshot.messages.map((m) => m.role).join(',') === 'user,assistant,assistant,tool', 'its messages',
    snapshot.messages);
  expect(snapshot.messages[2].toolCalls[0].function.arguments === '{"expression": "2+3"}', 'the call', snapshot.messages);
  expect(atSnapshot.length === snapshot.messages.length + 1, 'the broken text was the one message more', atSnapshot);
  const roles = a.messages.map((m) => m.role).join(',');
  expect(roles === 'user,assistant,assistant,tool,assistant', 'the thread after the run', a.messages);
  expect(a.messages.at(-1).content === 'The result is 5, as computed.', 'the answer once', a.messages);
  return run.length;
}

// `?steps=whole`: each step's events once its stream has ended; the broken attempt never
// reaches the agent.
async function wholeStepsCheck() {
  const a = agent(thread('whole'), [], '/api/ag-ui?steps=whole');
  say(a, 'whole steps, despite a broken stream');
  await a.runAgent({ forwardedProps: { model: models.restart_whole, toolset: 'none' } });
  const [run] = await rec.runs();
  expect(await stepRestarted(run), 'the step was restarted', run[0]);
  expect(types(run).filter((t) => t === 'TEXT_MESSAGE_START').length === 1, 'the broken attempt was never sent', types(run));
  expect(!types(run).includes('MESSAGES_SNAPSHOT'), 'nothing to take back', types(run));
  const texts = a.messages.filter((m) => m.role === 'assistant');
  expect(texts.length === 1 && texts[0].content === models.restart_text, 'the text once', a.messages);
  return run.length;
}

async function notebookCheck() {
  const a = agent(thread('nb'));
  say(a, 'make a cell');
  await a.runAgent({ forwardedProps: { model: models.notebook, toolset: 'notebook' } });
  const [run] = await rec.runs();
  expect(types(run)[1] === 'STATE_SNAPSHOT', 'the notebook first', types(run));
  expect(types(run).includes('STATE_DELTA'), 'then its changes', types(run));
  const cells = a.state.notebook.cells;
  expect(cells.length === 1 && cells[0].code === 'x = 1 + 1', 'the cell is in the state', a.state);
  return run.length;
}

for (const check of [textCheck, liveCheck, clientToolCheck, approvalCheck, steerCheck, restartCheck, restartAfterToolCheck,
  wholeStepsCheck, notebookCheck]) {
  const events = await check();
  console.log(JSON.stringify({ ok: true, check: check.name, events }));
}
