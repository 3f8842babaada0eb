// Commands with e2b@2.51.0: foreground, exit codes, background streaming,
// stdin, kill, list, env and cwd.
import { Sandbox } from 'e2b'
import { check, done, rejects, sleep } from './lib.mjs'

const sbx = await Sandbox.create({ timeoutMs: 120_000 })

await check('echo', async () => (await sbx.commands.run('echo hello')).stdout)
await check('stderr', async () => (await sbx.commands.run('echo oops >&2')).stderr)
await check('exit0', async () => (await sbx.commands.run('true')).exitCode)
await check('exit3', async () => {
  try {
    await sbx.commands.run('echo before; exit 3')
    return 'resolved'
  } catch (err) {
    return `${err.name} ${err.exitCode} ${JSON.stringify(err.stdout)}`
  }
})
await check('envs', async () => (await sbx.commands.run('echo $GREETING', { envs: { GREETING: 'hi there' } })).stdout)
await check('cwd', async () => (await sbx.commands.run('pwd', { cwd: '/home/user' })).stdout)
await check('defaultCwd', async () => (await sbx.commands.run('pwd')).stdout)

await check('background.stream', async () => {
  const seen = []
  const h = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.2; done', {
    background: true,
    onStdout: (d) => seen.push(d),
  })
  const r = await h.wait()
  return `${seen.join('').trim().split('\n').join(',')} exit=${r.exitCode} pid>0=${h.pid > 0}`
})
await check('onStderr', async () => {
  const seen = []
  await sbx.commands.run('echo warn >&2', { onStderr: (d) => seen.push(d) })
  return seen.join('')
})

await check('stdin', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'from stdin\n')
  await h.closeStdin()
  const r = await h.wait()
  return r.stdout
})

await check('kill', async () => {
  const h = await sbx.commands.run('sleep 60', { background: true })
  const listed = (await sbx.commands.list()).some((p) => p.pid === h.pid)
  const killed = await sbx.commands.kill(h.pid)
  let waited
  try {
    await h.wait()
    waited = 'resolved'
  } catch (err) {
    waited = err.name
  }
  return `listed=${listed} killed=${killed} wait=${waited}`
})
await check('kill.unknown', () => sbx.commands.kill(999999))
await check('timeout', async () => {
  try {
    await sbx.commands.run('sleep 30', { timeoutMs: 1000 })
    return 'resolved'
  } catch (err) {
    return err.name
  }
})

await check('outlivesStream', async () => {
  const h = await sbx.commands.run('sleep 1; echo late > late.txt', { background: true })
  await h.disconnect()
  for (let i = 0; i < 50; i++) {
    if (await sbx.files.exists('/home/user/late.txt')) {
      return (await sbx.files.read('/home/user/late.txt')).trim()
    }
    await sleep(200)
  }
  return 'missing'
})
await rejects('connect.unknown', () => sbx.commands.connect(999999))

await sbx.kill()
done()
