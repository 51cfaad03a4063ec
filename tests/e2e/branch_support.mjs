// What the AI SDK and AG-UI branch checks (aisdk/branches.mjs, agui/branches.mjs) share: the
// server and the mock provider from the environment (TS_URL, TS_KEY, TS_MOCK), a failing check,
// the session as the server holds it, and the conversation the mock was last sent for a model.

export const base = process.env.TS_URL;
export const key = process.env.TS_KEY;
export const mock = process.env.TS_MOCK;

export function expect(cond, what, detail) {
  if (!cond) throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

export const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

export async function session(sid) {
  const res = await fetch(`${base}/api/sessions/${sid}`, { headers: { Authorization: `Bearer ${key}` } });
  expect(res.status === 200, 'GET session', res.status);
  return res.json();
}

// The user and assistant messages of a provider request, in any of the three wire formats.
export function said(body) {
  const out = [];
  for (const m of body.messages ?? body.input ?? []) {
    if (m.role !== 'user' && m.role !== 'assistant') continue;
    const text = typeof m.content === 'string' ? m.content
      : (m.content ?? []).filter((p) => typeof p?.text === 'string').map((p) => p.text).join(' ');
    out.push([m.role, text]);
  }
  return out;
}

// What the mock was last sent for `model` ("<wire format>:<scenario>").
export async function lastRequest(model) {
  const name = model.split(':')[1];
  const got = await (await fetch(`${mock}/_mock/requests`)).json();
  return said(got.filter((r) => r.body.model === name).at(-1).body);
}
