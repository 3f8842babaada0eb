package e2b

// DescriptorsPerSandbox is how many descriptors E2B's API may make the
// server hold for one sandbox beyond what the session holds itself
// (sandbox.DescriptorsPerSandbox, whose named interpreters include the
// code contexts): its running commands and its directory watchers, at
// their caps. The server keeps these free of connections too, so a
// sandbox at its caps cannot make the server run out of descriptors.
const DescriptorsPerSandbox = maxProcs*descriptorsPerProc + maxWatchersPerSandbox*descriptorsPerWatcher

const (
	// descriptorsPerProc is what one command started through the API
	// holds in the server: the host ends of its three pipes and its
	// process handle; measured, 64 background commands added 255.
	descriptorsPerProc = 4
	// descriptorsPerWatcher is what one WatchDir or watcher holds: its
	// inotify instance, with room for the directories a recursive walk
	// holds open while it adds watches.
	descriptorsPerWatcher = 4
)
