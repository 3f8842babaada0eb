// Package streammux carries many duplex channels over one byte stream,
// for an agent that cannot be handed descriptors: one in a VM behind a
// serial port, or in a pod behind a TCP connection. The agent protocol's
// control, each exec's stdin, stdout and stderr (and later file
// operations) each get a channel.
//
// The peer is the sandbox's, so it is hostile, and the package holds
// against it:
//
//   - Frames are strictly parsed (see frame.go): a known type, a channel
//     the peer may use, the length its type allows, channel ids opened in
//     order and never reused. A frame that breaks any rule ends the
//     stream with one line (matching ErrProtocol) naming the rule.
//   - Flow control per channel: a receiver holds at most Window bytes of
//     a channel and its sender waits for credit, so a flood on one stdout
//     never blocks control or another exec, and data past the window is
//     a breach, not a buffer to grow.
//   - Memory is bounded in total: each end may have MaxChannels open,
//     so what a peer can make its end buffer is at most 2*MaxChannels
//     windows (8 MiB with DefaultConfig), plus one frame.
//   - Every wait is bounded: the stream's reader never writes (credit goes
//     out from its own goroutine), so two ends flooding each other never
//     wait for each other, and a frame's write waits at most WriteTimeout
//     for a peer that reads nothing. Close ends every wait.
//   - No keepalive: a silent peer costs nothing here, and the agent
//     protocol above bounds what it waits for (an exec's timeout, the
//     grace for an exit report).
//
// Why not github.com/hashicorp/yamux (v0.1.2, read for this): it answers
// each ping in a goroutine of its own, which a peer that sends pings and
// reads nothing multiplies without bound (each lives until its write
// times out); it bounds only streams not yet accepted (AcceptBacklog),
// not those open, so its memory is the peer's streams times a window of
// at least 256 KiB with no total; it takes frames with any flag
// combination; and it is a new module. Its speed is no reason to take
// it: measured in one process over a unix socket pair on a 2-core VM
// shared with other builds (medians of 21 interleaved runs, 100 MiB on
// one channel in 64 KiB writes, then 2000 one-byte round trips):
//
//	                      100 MiB            one-byte round trip
//	pipes (the fd path)   156 ms (673 MB/s)  37 us
//	streammux             147 ms (711 MB/s)  82 us (2.2x)
//	yamux                 211 ms (497 MB/s)  86 us (2.3x)
//
// A channel's bulk rate matches a pipe's; its round trip pays a hand-off
// between goroutines (the stream's reader, then the channel's), tens of
// microseconds against an exec's milliseconds. BenchmarkBulk* and
// BenchmarkRoundTrip* measure the same here against a pipe and a bare
// socket.
package streammux
