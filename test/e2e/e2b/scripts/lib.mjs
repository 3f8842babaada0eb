// Shared by the compatibility scripts: each script records named checks
// and prints them as one JSON line for test/e2e/e2b_test.go, which
// compares every check with what the SDK's documented behaviour wants.
// A check that throws records "error: NAME: MESSAGE" and the script goes
// on, so one failure does not hide the others.

const checks = {}

// check runs fn and records its value (or its error) under name.
export async function check(name, fn) {
  try {
    checks[name] = await fn()
  } catch (err) {
    checks[name] = errorText(err)
  }
  return checks[name]
}

// errorText names an error by its class, as the tests compare it.
export function errorText(err) {
  const msg = String(err?.message ?? err).split('\n')[0].slice(0, 300)
  return `error: ${err?.name ?? 'Error'}: ${msg}`
}

// rejects records the class name of the error fn throws, or "resolved".
export async function rejects(name, fn) {
  return check(name, async () => {
    try {
      await fn()
    } catch (err) {
      return err?.name ?? 'Error'
    }
    return 'resolved'
  })
}

// done prints every check as one JSON line and ends the process.
export function done() {
  process.stdout.write(JSON.stringify(checks) + '\n')
  process.exit(0)
}

// A script that hangs prints what it has and stops by itself: the Go test
// bounds it too, but this way its checks are not lost.
const budgetMs = Number(process.env.E2B_SCRIPT_BUDGET_MS || 150000)
setTimeout(() => {
  checks.timedOut = `script did not finish within ${budgetMs} ms`
  done()
}, budgetMs).unref()

// env is a required environment variable.
export function env(name) {
  const v = process.env[name]
  if (!v) {
    throw new Error(`${name} is not set: run this through test/e2e/e2b_test.go`)
  }
  return v
}

// sleep waits ms milliseconds.
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
