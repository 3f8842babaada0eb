package workspace

// TreeCopy is what CopyTree copied.
type TreeCopy struct {
	// Bytes is the size of the regular files copied.
	Bytes int64
	// Skipped counts the devices, FIFOs and sockets left out.
	Skipped int
}
