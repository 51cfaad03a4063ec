// Branches from useChat (docs/aisdk.md): each pinned major's AbstractChat (what useChat wraps)
// edits an earlier message (setMessages, then sendMessage; and sendMessage({ text, messageId })),
// regenerates an answer (regenerate({ messageId }) and regenerate()), and goes on from there.
// After every request the server's tree must be the conversation the Chat shows: the branch
// ending at the session's current_leaf is the Chat's assistant messages (their ids are the
// turns' ids), each turn's input the user message before its answer; and the provider (the
// mock) must have been sent that branch's path and nothing of another.
//
// Env: TS_URL (server), TS_KEY (API key), TS_MOCK (the mock provider's URL), TS_MODELS (JSON:
// version -> "<wire format>:<scenario>", a scenario answering "re: <input>"), TS_VERSIONS
// (e.g. "5,6,7"). Prints one JSON line per version; exits non-zero on the first failure.
import { base, expect, key, lastRequest, same, session } from '../branch_support.mjs';

const models = JSON.parse(process.env.TS_MODELS);
const versions = process.env.TS_VERSIONS.split(',').map(Number);
const textOf = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

// Every chunk the server sent must pass the version's own schema.
function recorder(sdk) {
  const bodies = [];
  const check = async () => {
    const schema = sdk.uiMessageChunkSchema();
    for (const body of await Promise.all(bodies.splice(0))) {
      for (const f of body.split('\n\n').filter((x) => x.startsWith('data: ') && x !== 'data: [DONE]')) {
        const chunk = JSON.parse(f.slice('data: '.length));
        const checked = await schema.validate(chunk);
        expect(checked.success, `schema rejects ${chunk.type}`, [chunk, String(checked.error)]);
      }
    }
  };
  const fetcher = async (url, init) => {
    const res = await fetch(url, init);
    if (res.status !== 200 || !res.body) return res;
    const [mine, theirs] = res.body.tee();
    bodies.push(new Response(mine).text());
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return { check, fetcher };
}

// A Chat as useChat holds it, with a plain array for its state.
function newChat(sdk, v, id, body, fetcher) {
  const state = {
    status: 'ready',
    error: undefined,
    messages: [],
    pushMessage(m) { this.messages = this.messages.concat(m); },
    popMessage() { this.messages = this.messages.slice(0, -1); },
    replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; },
    snapshot: (x) => structuredClone(x),
  };
  const headers = { Authorization: `Bearer ${key}`, 'X-AI-SDK-Version': String(v) };
  class TestChat extends sdk.AbstractChat {}
  return new TestChat({
    id, state, onError: () => {},
    transport: new sdk.DefaultChatTransport({ api: `${base}/api/chat`, headers, body, fetch: fetcher }),
  });
}

// The Chat's conversation is the branch shown, and the model read exactly that branch.
async function shows(c, model, rec, what) {
  await rec.check();
  expect(c.status === 'ready' && !c.error, `${what}: chat ready`, [c.status, c.error && String(c.error)]);
  const ms = c.messages;
  const answers = ms.filter((m) => m.role === 'assistant');
  expect(ms.map((m) => m.role).join() === answers.map(() => 'user,assistant').join(), `${what}: one answer each`, ms);
  const s = await session(answers[0].metadata.session_id);
  const byId = Object.fromEntries(s.turns.map((t) => [t.id, t]));
  const branch = [];
  for (let at = byId[s.current_leaf]; at; at = byId[at.parent_turn_id]) branch.unshift(at);
  expect(same(branch.map((t) => t.id), answers.map((m) => m.id)), `${what}: the branch shown is the chat's`,
    [branch.map((t) => [t.id, t.parent_turn_id, t.input]), answers.map((m) => m.id)]);
  const inputs = ms.filter((m) => m.role === 'user').map(textOf);
  expect(same(branch.map((t) => t.input), inputs), `${what}: each turn's input`, [branch.map((t) => t.input), inputs]);
  expect(answers.every((m, i) => textOf(m) === `re: ${inputs[i]}`), `${what}: answers`, answers.map(textOf));
  const path = inputs.flatMap((text, i) => (i < inputs.length - 1 ? [['user', text], ['assistant', `re: ${text}`]]
    : [['user', text]]));
  const sent = await lastRequest(model);
  expect(same(sent, path), `${what}: the model read this branch only`, [sent, path]);
  return s;
}

async function branches(v) {
  const sdk = await import(`ai${v}`);
  const model = models[v];
  const rec = recorder(sdk);
  const c = newChat(sdk, v, `branches-${v}-${Date.now().toString(36)}`, { model, toolset: 'none' }, rec.fetcher);
  for (const text of ['one', 'two', 'three']) await c.sendMessage({ text });
  let s = await shows(c, model, rec, 'three turns');
  const [one, two] = s.turns;

  // Edit "two" as an app does with setMessages: keep what came before it, then send the new text.
  c.messages = c.messages.slice(0, 2);
  await c.sendMessage({ text: 'two, edited' });
  s = await shows(c, model, rec, 'edited by setMessages');
  const edited = s.turns.at(-1);
  expect(edited.parent_turn_id === one.id && s.turns.length === 4, 'the edit is beside "two"', s.turns);
  await c.sendMessage({ text: 'three on b' });
  s = await shows(c, model, rec, 'after the edit');

  // Another answer to "two, edited": regenerate names its answer, whose id is its turn's.
  await c.regenerate({ messageId: c.messages[3].id });
  s = await shows(c, model, rec, 'regenerated');
  const again = s.turns.at(-1);
  expect(again.parent_turn_id === one.id && again.input === 'two, edited' && again.id !== edited.id,
    'a new version of "two, edited" beside it', [again, edited]);

  // The first message edited in place (sendMessage with its id): a new first turn.
  await c.sendMessage({ text: 'one, edited', messageId: c.messages[0].id });
  s = await shows(c, model, rec, 'first message edited');
  const first = s.turns.at(-1);
  expect(first.parent_turn_id === null, 'a new first turn', first);

  // regenerate() without an id: the last answer again, beside it; then the chat goes on.
  await c.regenerate();
  s = await shows(c, model, rec, 'last answer regenerated');
  expect(s.turns.at(-1).parent_turn_id === null && s.turns.at(-1).input === 'one, edited', 'beside it', s.turns.at(-1));
  await c.sendMessage({ text: 'and then' });
  s = await shows(c, model, rec, 'going on');

  // Every version is kept: three of "two", three of the first message.
  const versionsOf = (t) => s.turns.filter((x) => x.parent_turn_id === t.parent_turn_id).map((x) => x.input);
  expect(same(versionsOf(two), ['two', 'two, edited', 'two, edited']), 'the versions of "two"', versionsOf(two));
  expect(same(versionsOf(one), ['one', 'one, edited', 'one, edited']), 'the versions of "one"', versionsOf(one));
  expect(s.turns.length === 9, 'nine turns', s.turns.map((t) => [t.input, t.parent_turn_id]));
  return s.turns.length;
}

for (const v of versions) {
  const turns = await branches(v);
  console.log(JSON.stringify({ ok: true, version: v, check: 'branches', turns }));
}
