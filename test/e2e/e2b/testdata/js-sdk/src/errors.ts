// Warden's stand-in for the SDK source tree the vendored tests import
// (../src/...): the tests run against the published, pinned npm package.
export * from 'e2b'
