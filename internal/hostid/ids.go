package hostid

// Host ids for sandboxes run by root come from a block no distribution
// hands out (subordinate ranges start at 100000 and grow by 65536), so a
// sandbox's files and processes never share an identity with a real user,
// and no two live sandboxes share one with each other.
const (
	idPoolBase = 0x7E000000
	idPoolSize = 1 << 16
)

// WorkspaceOwner owns the files of persistent session workspaces on the
// host (see internal/state): the id just past the pool, which no process
// ever runs as. Each sandbox reaches its workspace through an idmapped
// bind that shows this owner as the sandbox user.
const WorkspaceOwner = idPoolBase + idPoolSize
