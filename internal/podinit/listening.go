package podinit

// logPrefix begins every line of the pod mode's log.
const logPrefix = "warden-init pod: "

// ListeningLine is the line the pod mode logs once it serves on addr:
// the one source of it for launchers that wait for it, such as the test
// bed's kubelet with a relayed listener, which takes connections before
// the init does.
func ListeningLine(addr string) string { return logPrefix + listening(addr) }

// listening is ListeningLine without the log's prefix.
func listening(addr string) string { return "listening on " + addr }
