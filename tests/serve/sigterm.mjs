// A stream in flight when the server gets SIGTERM ends: the client gets the
// finish chunk and data: [DONE], or at least a closed stream, never a hang.
// Prints "streaming" on its own line once text arrives (tests/serve_test.cpp
// then sends the signal), then {done, finish_reason, events, closed_early}.
// config.long: a body that generates for long.
import { check, config, fail, postStream, print, readEvents } from './lib.mjs';

const timer = setTimeout(() => fail('the stream did not end within 30 s of the first text: a hang'), 30000);
const r = await postStream('/v1/chat/completions', config.long);
check(r.status === 200, () => `HTTP ${r.status}`);
let announced = false, done = false, finish = null, events = 0, closedEarly = false;
try {
  ({ done } = await readEvents(r, (event) => {
    ++events;
    check(!event.error, () => `an error event: ${JSON.stringify(event)}`);
    finish = event.choices?.[0]?.finish_reason ?? finish;
    const delta = event.choices?.[0]?.delta ?? {};
    if (!announced && (delta.content || delta.reasoning_content)) {
      announced = true;
      process.stdout.write('streaming\n');
    }
  }));
} catch (e) {
  closedEarly = `${e.cause?.code ?? ''} ${e.message}`;  // the server closed the connection mid-stream
}
clearTimeout(timer);
check(announced, 'the stream ended before any text came');
print({ done, finish_reason: finish, events, closed_early: closedEarly });
