// Runs E2B's own JS SDK tests (vendored unchanged under tests/, see
// README.md) against a Warden server named by E2B_API_URL and
// E2B_SANDBOX_URL, with the pinned npm package instead of the SDK's source.
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  test: {
    include: ['tests/**/*.test.ts'],
    environment: 'node',
    globals: false,
    isolate: true,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
    bail: 0,
  },
})
