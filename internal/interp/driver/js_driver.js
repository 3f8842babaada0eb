// Warden's JavaScript driver: a persistent, notebook-like Node.js.
//
// The host starts it as `node -e <this file>` with requests on descriptor
// 3 and replies on 4, one JSON line each. Each request's code runs as a
// script in this context, so top-level var, let, const, function and class
// declarations persist to the next run. The completion value (awaited when
// it is a promise) is the run's value. After each run the driver writes the
// run's token to stdout and stderr, then a "done" reply.
(function () {
  'use strict';
  const fs = require('fs');
  const vm = require('vm');
  const util = require('util');
  const { StringDecoder } = require('string_decoder');

  const CTL = 3;
  const REP = 4;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const inspect = util.inspect;
  const outWrite = process.stdout.write.bind(process.stdout);
  const errWrite = process.stderr.write.bind(process.stderr);
  const limits = { max_output: 8 << 20, max_value: 1 << 20 };

  function send(msg) {
    const b = Buffer.from(stringify(msg) + '\n');
    let off = 0;
    while (off < b.length) {
      try {
        off += fs.writeSync(REP, b, off);
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
      }
    }
  }

  function clip(text) {
    const limit = limits.max_value;
    if (text.length > limit) {
      return text.slice(0, limit) + `... [${text.length - limit} characters cut]`;
    }
    return text;
  }

  function note(msg) {
    errWrite('warden: ' + msg + '\n');
  }

  // display(data, mimeType) sends one rich output: bytes as base64, a
  // string as is, anything else as JSON (for application/json) or
  // util.inspect text.
  function display(data, mimeType) {
    let out;
    let enc = 'utf-8';
    if (data instanceof Uint8Array) {
      out = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');
      enc = 'base64';
      mimeType = mimeType || 'application/octet-stream';
    } else if (typeof data === 'string') {
      out = data;
    } else if (mimeType === 'application/json') {
      out = stringify(data);
    } else {
      out = inspect(data);
    }
    mimeType = mimeType || 'text/plain';
    if (out.length > limits.max_output) {
      note(`${mimeType} output of ${out.length} bytes dropped (limit ${limits.max_output})`);
      return;
    }
    send({ t: 'output', mime: mimeType, data: out, enc });
  }
  globalThis.display = display;

  const hidden = /\[eval\]|node:vm|node:internal/;

  function exception(e) {
    if (e !== null && typeof e === 'object' && typeof e.stack === 'string') {
      const type = String(e.name || (e.constructor && e.constructor.name) || 'Error');
      const stack = e.stack.split('\n').filter((l) => !hidden.test(l)).join('\n');
      return { type, message: clip(String(e.message)), traceback: clip(stack) };
    }
    return { type: 'Uncaught', message: clip(inspect(e)), traceback: '' };
  }

  async function execute(code, filename) {
    let value;
    try {
      value = new vm.Script(code, { filename }).runInThisContext();
      if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
        value = await value;
      }
    } catch (e) {
      return ['', exception(e)];
    }
    if (value === undefined) return ['', null];
    try {
      return [clip(inspect(value)), null];
    } catch (e) {
      return ['', exception(e)];
    }
  }

  function flush(write, token) {
    return new Promise((resolve) => write(token, () => resolve()));
  }

  let count = 0;
  async function handle(req) {
    count++;
    for (const k of Object.keys(limits)) {
      if (typeof req[k] === 'number') limits[k] = req[k];
    }
    const [value, exc] = await execute(req.code, `<exec-${count}>`);
    await flush(outWrite, req.token);
    await flush(errWrite, req.token);
    send({ t: 'done', value, exc });
  }

  process.on('uncaughtException', (e) => note('uncaught ' + (e && e.stack ? e.stack : inspect(e))));
  process.on('unhandledRejection', (e) => note('unhandled rejection ' + (e && e.stack ? e.stack : inspect(e))));

  const input = fs.createReadStream(null, { fd: CTL, autoClose: false, highWaterMark: 1 << 16 });
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let queue = Promise.resolve();
  input.on('data', (chunk) => {
    let from = pending.length;
    pending += decoder.write(chunk);
    let i;
    while ((i = pending.indexOf('\n', from)) >= 0) {
      const req = parse(pending.slice(0, i));
      pending = pending.slice(i + 1);
      from = 0;
      queue = queue.then(() => handle(req));
    }
  });
  input.on('end', () => queue.then(() => process.exit(0)));
  input.on('error', () => process.exit(1));
  send({ t: 'ready' });
})();
