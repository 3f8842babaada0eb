// Files with e2b@2.51.0: write, read, list, makeDir, rename, remove,
// exists, getInfo, and links the sandbox plants towards a host file.
import { Sandbox } from 'e2b'
import { check, done, env, rejects } from './lib.mjs'

const secretPath = env('E2B_HOST_SECRET_PATH')
const secret = env('E2B_HOST_SECRET')
const sbx = await Sandbox.create({ timeoutMs: 120_000 })
const f = sbx.files

await check('write', async () => (await f.write('/home/user/a.txt', 'alpha\n')).path)
await check('read', () => f.read('/home/user/a.txt'))
await check('readRelative', () => f.read('a.txt'))
await check('readBytes', async () => (await f.read('/home/user/a.txt', { format: 'bytes' })).length)
await check('seenByCommand', async () => (await sbx.commands.run('cat a.txt')).stdout)
await check('writeFromCommand', async () => {
  await sbx.commands.run('printf beta > b.txt')
  return f.read('/home/user/b.txt')
})
await check('writeFiles', async () => {
  await f.write([
    { path: '/home/user/multi/one.txt', data: '1' },
    { path: '/home/user/multi/two.txt', data: new Blob(['2']) },
  ])
  return (await f.list('/home/user/multi')).map((e) => e.name).sort().join(',')
})
await check('makeDir', () => f.makeDir('/home/user/dir/sub'))
await check('makeDir.again', () => f.makeDir('/home/user/dir/sub'))
await check('list', async () => {
  const entries = await f.list('/home/user')
  const a = entries.find((e) => e.name === 'a.txt')
  const d = entries.find((e) => e.name === 'dir')
  return `a=${a?.type}:${a?.size}:${a?.path} dir=${d?.type}`
})
await check('exists', async () => `${await f.exists('/home/user/a.txt')} ${await f.exists('/home/user/nope')}`)
await check('getInfo', async () => {
  const i = await f.getInfo('/home/user/a.txt')
  return `${i.name} ${i.type} ${i.size}`
})
await check('rename', async () => {
  const e = await f.rename('/home/user/a.txt', '/home/user/c.txt')
  return `${e.path} ${await f.exists('/home/user/a.txt')} ${await f.read('/home/user/c.txt')}`
})
await check('remove', async () => {
  await f.remove('/home/user/c.txt')
  return f.exists('/home/user/c.txt')
})
await rejects('read.missing', () => f.read('/home/user/missing.txt'))
await rejects('rename.missing', () => f.rename('/home/user/missing.txt', '/home/user/x'))
await check('binary', async () => {
  const bytes = new Uint8Array(256).map((_, i) => i)
  await f.write('/home/user/bin.dat', bytes.buffer)
  const back = await f.read('/home/user/bin.dat', { format: 'bytes' })
  return back.length === 256 && back.every((b, i) => b === i)
})

// The sandbox plants links towards a file of the host; reading or writing
// through them must never reach it (host-side access is link-safe).
await check('link.plant', async () => (await sbx.commands.run(`ln -s ${secretPath} evil && ln -s / root`)).exitCode)
await check('link.read.leaks', async () => {
  try {
    return (await f.read('/home/user/evil')).includes(secret)
  } catch {
    return false
  }
})
await check('link.readThroughDir.leaks', async () => {
  try {
    return (await f.read(`/home/user/root${secretPath}`)).includes(secret)
  } catch {
    return false
  }
})
await check('link.write', async () => {
  try {
    await f.write('/home/user/evil', 'overwritten by the sandbox')
    return 'written'
  } catch (err) {
    return 'refused'
  }
})
await check('link.list', async () => (await f.list('/home/user')).some((e) => e.name === 'evil'))

await sbx.kill()
done()
