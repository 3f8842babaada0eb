// Pause and resume with @e2b/code-interpreter@2.8.0 (e2b@2.51.0): the
// interpreter's variables survive, a paused sandbox is listed as paused,
// connect resumes it, and a second pause says it was already paused.
import { Sandbox } from '@e2b/code-interpreter'
import { check, done } from './lib.mjs'

const tag = `pause-${process.pid}`
const sbx = await Sandbox.create({ metadata: { test: tag }, timeoutMs: 120_000 })
await sbx.runCode('x = 41')

await check('pause', () => sbx.pause())
await check('pause.again', () => sbx.pause())
await check('info.state.paused', async () => (await Sandbox.getInfo(sbx.sandboxId)).state)
await check('list.paused', async () => {
  const pages = Sandbox.list({ query: { metadata: { test: tag }, state: ['paused'] } })
  const items = await pages.nextItems()
  return items.map((s) => `${s.sandboxId === sbx.sandboxId} ${s.state}`).join(',')
})
await check('list.default', async () => {
  const pages = Sandbox.list({ query: { metadata: { test: tag } } })
  return (await pages.nextItems()).map((s) => s.state).join(',')
})
await check('list.running.excludes', async () => {
  const pages = Sandbox.list({ query: { metadata: { test: tag }, state: ['running'] } })
  return (await pages.nextItems()).length
})
await check('connect.resumes', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  return (await again.runCode('x + 1')).text
})
await check('info.state.running', async () => (await Sandbox.getInfo(sbx.sandboxId)).state)
await check('kill', () => sbx.kill().then(() => true))
done()
