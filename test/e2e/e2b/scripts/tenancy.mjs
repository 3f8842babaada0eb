// Two API keys: the second sees and uses nothing of the first's sandbox,
// whether through the control plane or the data plane with its id.
import { Sandbox } from 'e2b'
import { check, done, env, rejects } from './lib.mjs'

const other = { apiKey: env('E2B_OTHER_API_KEY') }
const sandboxUrl = env('E2B_SANDBOX_URL')
const mine = await Sandbox.create({ timeoutMs: 120_000 })
const theirs = await Sandbox.create({ ...other, timeoutMs: 120_000 })

await check('other.list.sees', async () => {
  const pages = Sandbox.list(other)
  const ids = []
  for (let i = 0; i < 20 && pages.hasNext; i++) {
    ids.push(...(await pages.nextItems()).map((s) => s.sandboxId))
  }
  return `mine=${ids.includes(mine.sandboxId)} theirs=${ids.includes(theirs.sandboxId)}`
})
await rejects('other.getInfo', () => Sandbox.getInfo(mine.sandboxId, other))
await rejects('other.connect', () => Sandbox.connect(mine.sandboxId, other))
await rejects('other.setTimeout', () => Sandbox.setTimeout(mine.sandboxId, 5_000, other))
await check('other.kill', () => Sandbox.kill(mine.sandboxId, other))

// The data plane with the first key's sandbox id: no token, and the
// token of the other key's own sandbox.
async function raw(path, token, body) {
  const headers = {
    'E2b-Sandbox-Id': mine.sandboxId,
    'E2b-Sandbox-Port': '49983',
    'Content-Type': 'application/json',
  }
  if (token) {
    headers['X-Access-Token'] = token
  }
  const res = await fetch(new URL(path, sandboxUrl), {
    method: body === undefined ? 'GET' : 'POST',
    headers,
    body,
  })
  return res.status
}
await check('data.noToken.files', () => raw('/files?path=/home/user/x', undefined))
await check('data.otherToken.files', () => raw('/files?path=/home/user/x', theirs.envdAccessToken))
await check('data.otherToken.listDir', () =>
  raw('/filesystem.Filesystem/ListDir', theirs.envdAccessToken, JSON.stringify({ path: '/home/user' }))
)
await check('data.otherToken.start', () =>
  raw('/process.Process/List', theirs.envdAccessToken, '{}')
)
await check('tokensDiffer', () => mine.envdAccessToken !== theirs.envdAccessToken && !!mine.envdAccessToken)

await check('mine.stillWorks', async () => (await mine.commands.run('echo alive')).stdout)
await check('theirs.works', async () => (await theirs.commands.run('echo theirs')).stdout)
await mine.kill()
await theirs.kill()
done()
