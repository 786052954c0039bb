// A stream in flight when the server gets SIGTERM ends: the client gets the
// finish chunk and data: [DONE], or at least a closed stream, never a hang.
// Prints "streaming" on its own line once text arrives (tests/serve_test.cpp
// then sends the signal), then {done, finish_reason, events, closed_early}.
// config.long: a body that generates for long.
import { check, config, fail, postStream, print } from './lib.mjs';

const timer = setTimeout(() => fail('the stream did not end within 30 s of the first text: a hang'), 30000);
const r = await postStream('/v1/chat/completions', config.long);
check(r.status === 200, () => `HTTP ${r.status}`);
const reader = r.body.getReader();
const decoder = new TextDecoder();
let buffer = '', announced = false, done = false, finish = null, events = 0, closedEarly = false;
try {
  for (;;) {
    const { done: eof, value } = await reader.read();
    if (eof) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!block.startsWith('data: ')) continue;
      const data = block.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const event = JSON.parse(data);
      ++events;
      check(!event.error, () => `an error event: ${data}`);
      finish = event.choices?.[0]?.finish_reason ?? finish;
      const delta = event.choices?.[0]?.delta ?? {};
      if (!announced && (delta.content || delta.reasoning_content)) {
        announced = true;
        process.stdout.write('streaming\n');
      }
    }
  }
} catch (e) {
  closedEarly = `${e.cause?.code ?? ''} ${e.message}`;  // the server closed the connection mid-stream
}
clearTimeout(timer);
check(announced, 'the stream ended before any text came');
print({ done, finish_reason: finish, events, closed_early: closedEarly, rest: buffer });
