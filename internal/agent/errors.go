package agent

import "errors"

// ErrNoChannel is an exec refused because its session's stream has no
// room for its channels: the processes running in a stream-transport
// session at once fill it (streammux's MaxChannels, about ten of three
// fds each). Only this exec fails; nothing was harmed, and the same exec
// can run once one of the others ends.
var ErrNoChannel = errors.New("too many processes run in this session at once (each stream of one holds a channel to the sandbox): wait for one to end")
