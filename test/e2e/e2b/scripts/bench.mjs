// Benchmark, one JSON line of milliseconds:
//  - start: Sandbox.create() + the first commands.run('true'), from a warm
//    pool, against Warden's own API doing the same (POST /v1/sessions +
//    an exec of `true`), alternated so drifting load hits both alike, each
//    as create, first command and total;
//  - runCode('1+1') against Warden's own exec API (POST
//    /v1/sessions/{id}/exec, python 1+1) on the same session, alternated.
import { Sandbox } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { env } from './lib.mjs'

const starts = Number(process.env.E2B_BENCH_STARTS || 30)
const rounds = Number(process.env.E2B_BENCH_ROUNDS || 50)
// refillMs lets the pool build a sandbox again after each start, so every
// start is from a warm pool (the target is a warm start, not the pool's
// rate of building).
const refillMs = Number(process.env.E2B_BENCH_REFILL_MS || 1500)
const apiUrl = env('E2B_API_URL')
const apiKey = env('E2B_API_KEY')

function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]
}
function summary(xs) {
  const r = (x) => Math.round(x * 100) / 100
  return { n: xs.length, p50: r(quantile(xs, 0.5)), p99: r(quantile(xs, 0.99)), min: r(Math.min(...xs)) }
}
function pause(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

// own calls Warden's own API as the same key.
async function own(method, path, body, want) {
  const res = await fetch(new URL(path, apiUrl), {
    method,
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  if (res.status !== want) {
    throw new Error(`${method} ${path} = ${res.status} ${text.slice(0, 300)}, want ${want}`)
  }
  return text ? JSON.parse(text) : undefined
}

// e2bStart and ownStart return [create, first command, both] in ms.
async function e2bStart() {
  const t0 = performance.now()
  const sbx = await Sandbox.create()
  const t1 = performance.now()
  await sbx.commands.run('true')
  const t2 = performance.now()
  await sbx.kill()
  return [t1 - t0, t2 - t1, t2 - t0]
}
async function ownStart() {
  const t0 = performance.now()
  const ses = await own('POST', '/v1/sessions', {}, 201)
  const t1 = performance.now()
  await own('POST', `/v1/sessions/${ses.id}/exec`, { command: ['true'] }, 200)
  const t2 = performance.now()
  await own('DELETE', `/v1/sessions/${ses.id}`, undefined, 204)
  return [t1 - t0, t2 - t1, t2 - t0]
}

const parts = ['create', 'firstCommand', 'total']
const start = { e2b: [[], [], []], own: [[], [], []] }
for (let i = 0; i < starts + 1; i++) {
  const a = await e2bStart()
  await pause(refillMs)
  const b = await ownStart()
  await pause(refillMs)
  if (i > 0) {
    a.forEach((x, j) => start.e2b[j].push(x))
    b.forEach((x, j) => start.own[j].push(x))
  }
}

const sbx = await CodeSandbox.create()
const code = { e2b: [], own: [] }
for (let i = 0; i < rounds + 3; i++) {
  let t0 = performance.now()
  const r = await sbx.runCode('1+1')
  const a = performance.now() - t0
  if (r.text !== '2') {
    throw new Error(`runCode('1+1') = ${JSON.stringify(r.text)} (error ${r.error?.name}), want "2"`)
  }
  t0 = performance.now()
  await own('POST', `/v1/sessions/${sbx.sandboxId}/exec`, { language: 'python', code: '1+1' }, 200)
  const b = performance.now() - t0
  if (i >= 3) {
    code.e2b.push(a)
    code.own.push(b)
  }
}
await sbx.kill()

const byPart = (xs) => Object.fromEntries(parts.map((p, j) => [p, summary(xs[j])]))
const s = { e2b: byPart(start.e2b), own: byPart(start.own) }
const c = { e2b: summary(code.e2b), own: summary(code.own) }
process.stdout.write(
  JSON.stringify({
    start: { ...s, ratioP50: Math.round((s.e2b.total.p50 / s.own.total.p50) * 100) / 100 },
    runCode: { ...c, ratioP50: Math.round((c.e2b.p50 / c.own.p50) * 100) / 100 },
  }) + '\n'
)
process.exit(0)
