// Control plane with e2b@2.51.0: create, getInfo, list, setTimeout, kill.
import { Sandbox } from 'e2b'
import { check, done, rejects } from './lib.mjs'

const tag = `lifecycle-${process.pid}`
const sbx = await Sandbox.create('base', { metadata: { test: tag }, timeoutMs: 120_000 })
await check('created', () => sbx.sandboxId.length > 0)

const info = await Sandbox.getInfo(sbx.sandboxId)
await check('info.sandboxId', () => info.sandboxId === sbx.sandboxId)
await check('info.templateId', () => info.templateId)
await check('info.metadata', () => info.metadata?.test === tag)
await check('info.state', () => info.state)
await check('instance.getInfo', async () => (await sbx.getInfo()).sandboxId === sbx.sandboxId)
await check('isRunning', () => sbx.isRunning())

await check('list.mine', async () => {
  const pages = Sandbox.list({ query: { metadata: { test: tag } } })
  const ids = []
  for (let i = 0; i < 20 && pages.hasNext; i++) {
    ids.push(...(await pages.nextItems()).map((s) => s.sandboxId))
  }
  return ids.length === 1 && ids[0] === sbx.sandboxId
})
await check('list.all.includes', async () => {
  const pages = Sandbox.list()
  const ids = []
  for (let i = 0; i < 20 && pages.hasNext; i++) {
    ids.push(...(await pages.nextItems()).map((s) => s.sandboxId))
  }
  return ids.includes(sbx.sandboxId)
})

await check('setTimeout.extends', async () => {
  const before = (await Sandbox.getInfo(sbx.sandboxId)).endAt.getTime()
  await sbx.setTimeout(600_000)
  const after = (await Sandbox.getInfo(sbx.sandboxId)).endAt.getTime()
  return after > before
})
await check('connect', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  return (await again.commands.run('echo connected')).stdout
})

await check('kill', () => sbx.kill().then(() => true))
await check('isRunning.afterKill', () => sbx.isRunning())
await rejects('getInfo.afterKill', () => Sandbox.getInfo(sbx.sandboxId))
await check('staticKill.afterKill', () => Sandbox.kill(sbx.sandboxId))
await rejects('getInfo.unknown', () => Sandbox.getInfo('no-such-sandbox'))
done()
