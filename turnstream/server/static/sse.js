// Server-sent events over fetch(). EventSource cannot send an Authorization header nor
// POST a body, so the page reads the response body itself and splits it into events
// following the text/event-stream rules (fields event/data/id, comments, any line ending).

export async function* readEvents(response, signal) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const onAbort = () => reader.cancel().catch(() => {});
  signal?.addEventListener("abort", onAbort, { once: true });
  let buffer = "";
  let event = "message";
  let data = [];
  let id = null;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let start = 0;
      for (;;) {
        const nl = buffer.slice(start).search(/[\r\n]/);
        if (nl < 0) break;
        const at = start + nl;
        // A lone \r at the very end may be the first half of \r\n: wait for more bytes.
        if (buffer[at] === "\r" && at === buffer.length - 1) break;
        const line = buffer.slice(start, at);
        start = at + (buffer[at] === "\r" && buffer[at + 1] === "\n" ? 2 : 1);
        if (line === "") {
          if (data.length) yield { event, data: data.join("\n"), id };
          event = "message";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue; // a keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
        else if (field === "id") id = value;
      }
      buffer = buffer.slice(start);
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    reader.releaseLock?.();
  }
}

// "turn_abc:17" -> {turnId: "turn_abc", n: 17}; the turn id may itself hold colons.
export function parseEventId(id) {
  if (!id) return null;
  const at = id.lastIndexOf(":");
  if (at < 0) return null;
  const n = Number(id.slice(at + 1));
  return Number.isFinite(n) ? { turnId: id.slice(0, at), n } : null;
}
