package workspace

// TreeCopy is what CopyTree copied.
type TreeCopy struct {
	// Bytes is the data of the regular files copied (their holes left
	// out).
	Bytes int64
	// Skipped counts the devices, FIFOs and sockets left out.
	Skipped int
}
