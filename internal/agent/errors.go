package agent

import "errors"

// ErrNoChannel is an exec refused because its session's stream has no
// room for its channels: the processes running in a stream-transport
// session at once fill it (streammux's MaxChannels, about ten of three
// fds each), persistent interpreters included, which never end by
// themselves. Only this exec fails; nothing was harmed, and the same exec
// can run once one of the others ends or is closed: each front end says
// how its client closes one.
var ErrNoChannel = errors.New("too many processes and interpreters run in this session at once (each holds channels of its stream to the sandbox)")
