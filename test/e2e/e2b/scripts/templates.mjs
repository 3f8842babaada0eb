// A sandbox on a template of Warden's store (E2B_TEMPLATE), created by
// its id as E2B's custom templates are, and an id the store lacks.
import { Sandbox } from 'e2b'
import { check, done, rejects } from './lib.mjs'

const sbx = await Sandbox.create(process.env.E2B_TEMPLATE, { timeoutMs: 120_000 })
await check('created', () => sbx.sandboxId.length > 0)
await check('templateId', async () => (await sbx.getInfo()).templateId)
await check('image', async () => (await sbx.commands.run('test -x /usr/bin/python3.11 && echo image')).stdout)
await check('kill', () => sbx.kill().then(() => true))
await rejects('create.unknown', () => Sandbox.create('no-such-template', { timeoutMs: 60_000 }))
await check('create.unknown.message', async () => {
  try {
    await Sandbox.create('no-such-template', { timeoutMs: 60_000 })
  } catch (err) {
    return String(err?.message ?? err).split('\n')[0]
  }
  return 'resolved'
})
done()
