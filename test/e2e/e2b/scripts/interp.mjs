// Code interpreter with @e2b/code-interpreter@2.8.0: state kept between
// cells, a matplotlib chart as PNG, an exception, streaming callbacks and
// contexts.
import { Sandbox } from '@e2b/code-interpreter'
import { check, done } from './lib.mjs'

const sbx = await Sandbox.create({ timeoutMs: 120_000 })

await check('oneplusone', async () => (await sbx.runCode('1+1')).text)
await check('state', async () => {
  await sbx.runCode('x = 41')
  return (await sbx.runCode('x + 1')).text
})
await check('stdout', async () => (await sbx.runCode('print("hi")')).logs.stdout.join(''))
await check('stderr', async () => (await sbx.runCode('import sys; print("err", file=sys.stderr)')).logs.stderr.join(''))
await check('exception', async () => {
  const e = await sbx.runCode('1/0')
  return `${e.error?.name}|${e.error?.value}|${e.error?.traceback?.includes('ZeroDivisionError')}`
})
await check('chart', async () => {
  const e = await sbx.runCode(
    'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title("squares")\nplt.show()'
  )
  const png = e.results.find((r) => r.png)?.png
  if (!png) {
    return `no png: error=${e.error?.name} results=${e.results.length}`
  }
  const head = Buffer.from(png, 'base64').subarray(0, 8).toString('hex')
  return head === '89504e470d0a1a0a' ? 'png' : `not a png: ${head}`
})
await check('streaming', async () => {
  const out = []
  const results = []
  const errors = []
  await sbx.runCode('print("a")\nimport sys; print("b", file=sys.stderr)\n6*7', {
    onStdout: (m) => out.push(`out:${m.line.trim()}`),
    onStderr: (m) => out.push(`err:${m.line.trim()}`),
    onResult: (r) => results.push(r.text),
    onError: (e) => errors.push(e.name),
  })
  await sbx.runCode('raise ValueError("boom")', { onError: (e) => errors.push(e.name) })
  return `${out.sort().join(',')} results=${results.join(',')} errors=${errors.join(',')}`
})
await check('context', async () => {
  const ctx = await sbx.createCodeContext({ language: 'python' })
  await sbx.runCode('y = "in context"', { context: ctx })
  const own = (await sbx.runCode('y', { context: ctx })).text
  const other = (await sbx.runCode('y')).error?.name
  const listed = (await sbx.listCodeContexts()).some((c) => c.id === ctx.id)
  await sbx.restartCodeContext(ctx)
  const afterRestart = (await sbx.runCode('y', { context: ctx })).error?.name
  await sbx.removeCodeContext(ctx)
  const gone = !(await sbx.listCodeContexts()).some((c) => c.id === ctx.id)
  return `own=${own} other=${other} listed=${listed} restart=${afterRestart} removed=${gone}`
})
await check('javascript', async () => (await sbx.runCode('[1, 2, 3].map((n) => n * 2).join("-")', { language: 'javascript' })).text)
await check('bash', async () => (await sbx.runCode('echo from-bash', { language: 'bash' })).logs.stdout.join('').trim())

await sbx.kill()
done()
