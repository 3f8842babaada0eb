// e2b@2.50.0, which creates sandboxes with POST /sandboxes (2.51 uses
// /v2/sandboxes): create, a command, a file, kill.
import { Sandbox } from 'e2b-250'
import { check, done, rejects } from './lib.mjs'

const sbx = await Sandbox.create({ timeoutMs: 120_000 })
await check('created', () => sbx.sandboxId.length > 0)
await check('echo', async () => (await sbx.commands.run('echo old sdk')).stdout)
await check('file', async () => {
  await sbx.files.write('/home/user/old.txt', 'from 2.50')
  return sbx.files.read('/home/user/old.txt')
})
await check('kill', () => sbx.kill().then(() => true))
await rejects('getInfo.afterKill', () => Sandbox.getInfo(sbx.sandboxId))
done()
