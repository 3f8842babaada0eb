// Package hostid leases host user ids for sandboxes from a pool no
// distribution hands out, so no sandbox shares an identity with a real
// user or with another live sandbox. Leases are byte locks on one file,
// dropped by the kernel when their holder dies.
package hostid
