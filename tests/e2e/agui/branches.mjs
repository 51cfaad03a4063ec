// A thread whose history diverges (docs/ag-ui.md): @ag-ui/client's HttpAgent runs three
// turns, then the app drops the messages from the second user message on (setMessages), sends
// an edited one and goes on. Each new turn must follow the last turn the agent's history agrees
// with (GET /api/sessions/{id}: its parent_turn_id, and the current_leaf), and the provider
// (the mock) must have been sent that branch's path only.
//
// Env: TS_URL (server), TS_KEY (API key), TS_MOCK (the mock provider's URL), TS_MODEL
// ("<wire format>:<scenario>", a scenario answering "re: <input>"). Prints one JSON line;
// exits non-zero on the first failure.
import { HttpAgent } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';
import { base, expect, key, lastRequest, same, session } from '../branch_support.mjs';

const model = process.env.TS_MODEL;
const uid = () => Math.random().toString(36).slice(2);

// Every event of every run, checked with @ag-ui/core's schemas; the last run's kept.
let lastRun = [];
async function recordingFetch(url, init) {
  const res = await fetch(url, init);
  expect(res.status === 200, 'the run is answered', [res.status, res.status === 200 ? '' : await res.clone().text()]);
  lastRun = (await res.clone().text()).split('\n\n').filter((f) => f.startsWith('data: '))
    .map((f) => JSON.parse(f.slice('data: '.length)));
  for (const e of lastRun) expect(EventSchemas.safeParse(e).success, `schema rejects ${e.type}`, e);
  return res;
}

const agent = new HttpAgent({
  url: `${base}/api/ag-ui`, headers: { Authorization: `Bearer ${key}` }, threadId: `branches-${uid()}`,
  fetch: recordingFetch,
});

// Sends `text`; returns the new turn, after checking that it follows `parent` on the branch shown
// and that the model read the agent's own conversation and nothing else.
async function say(text, parent, what) {
  agent.addMessage({ id: `u-${uid()}`, role: 'user', content: text });
  await agent.runAgent({ forwardedProps: { model, toolset: 'none' } });
  const started = lastRun[0];
  expect(started.type === 'RUN_STARTED' && lastRun.at(-1).type === 'RUN_FINISHED', `${what}: a run`, lastRun);
  const s = await session(started.metadata.session_id);
  const turn = s.turns.find((t) => t.id === started.metadata.turn_id);
  expect(turn.input === text && turn.parent_turn_id === parent, `${what}: where the turn goes`,
    [turn.input, turn.parent_turn_id, parent]);
  expect(s.current_leaf === turn.id, `${what}: the branch shown`, s.current_leaf);
  const shown = agent.messages.filter((m) => m.role === 'user' || m.role === 'assistant')
    .map((m) => [m.role, m.content]);
  const sent = await lastRequest(model);
  expect(same(sent, shown.slice(0, -1)) && shown.at(-1)[1] === `re: ${text}`, `${what}: the model read this branch only`,
    [sent, shown]);
  return turn;
}

const one = await say('one', null, 'first');
const two = await say('two', one.id, 'second');
await say('three', two.id, 'third');
// The app edits "two": it keeps what came before it, and sends the new text.
const at = agent.messages.findIndex((m) => m.role === 'user' && m.content === 'two');
agent.setMessages(agent.messages.slice(0, at));
const edited = await say('two, edited', one.id, 'edited');
await say('three on b', edited.id, 'after the edit');
const s = await session(lastRun[0].metadata.session_id);
expect(same(s.turns.map((t) => t.input), ['one', 'two', 'three', 'two, edited', 'three on b']), 'every turn kept',
  s.turns);
console.log(JSON.stringify({ ok: true, check: 'branches', turns: s.turns.length }));
