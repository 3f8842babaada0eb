// Package streammux carries many duplex channels over one byte stream,
// for an agent that cannot be handed descriptors: one in a VM behind a
// serial port, or in a pod behind a TCP connection. The agent protocol's
// control, each exec's stdin, stdout and stderr (and later file
// operations) each get a channel.
//
// The peer is the sandbox's, so it is hostile, and the package holds
// against it:
//
//   - Each end's first frame is a hello (version, Window, MaxPayload,
//     MaxChannels): ends configured apart fail at once with ErrMismatch
//     naming both sides' figures, not later as a seeming breach.
//   - Frames are strictly parsed (see frame.go): a known type, a channel
//     the peer may use, the length its type allows, channel ids opened in
//     order and never reused. A frame that breaks any rule ends the
//     stream with one line (matching ErrProtocol) naming the rule.
//   - Flow control per channel: a receiver holds at most Window bytes of
//     a channel, in a ring of Window bytes allocated with its first data,
//     and its sender waits for credit, which goes back only as Read takes
//     bytes, so a flood on one stdout never blocks control or another
//     exec, and data past the window is a breach, not a buffer to grow.
//     A reader that paces its reads paces the peer's writer.
//   - A reader gone says so: CloseRead (and Close) send a stop, give no
//     credit for what still comes, and the peer's pending and later
//     Writes fail with ErrStopped, as a pipe's writer gets EPIPE.
//   - Memory is bounded in total: a channel keeps its slot until both
//     ends sent both their close and their stop, and an end sends its
//     stop only once its reader closed or read all; each end may have
//     MaxChannels slots, so what a peer can make its end buffer is at
//     most 2*MaxChannels windows (8 MiB with DefaultConfig), plus one
//     frame. A peer that never sends its close or stop keeps our slots:
//     Open then says how many wait for it, and the agent protocol is to
//     treat that as a breach.
//   - Waits: the stream's reader never writes (credit and stops go out
//     from a goroutine of its own), so two ends flooding each other never
//     wait for each other; a frame's write waits at most WriteTimeout
//     (on the monotonic clock) for a peer that reads nothing, then the
//     stream ends. A channel's Read and Write wait for the peer unless a
//     deadline is set; a write deadline is checked before each frame and
//     bounds the waits for credit and for the stream, and a frame already
//     being written is bounded by WriteTimeout. Close ends every wait.
//     New takes only a connection that accepts deadlines (a net.Conn, or
//     a pollable *os.File), so that closing it ends a pending read.
//   - No keepalive: a silent peer costs nothing here, and the agent
//     protocol above bounds what it waits for (an exec's timeout, the
//     grace for an exit report). Over TCP, a peer that died while idle is
//     seen only by TCP keepalive.
//   - Per-frame cost: a peer may pack thousands of 1-byte data frames in
//     each write, which cost the receiver a header's parse and a lock per
//     byte (hundreds of times the CPU of full frames) and the peer almost
//     nothing. Credit is counted in bytes, so it bounds bytes a second,
//     not frames; the reader is paced instead (Config.ReadRate, each frame
//     counting at least Config.FrameCost), which holds a flood of small
//     frames to ReadRate/FrameCost a second while full frames pass at
//     ReadRate. BenchmarkSmallFrameFlood measures it; docs/protocol.md
//     ("The stream transport") gives the figures.
//   - Checkpoints: a stream can be quiesced (each end's WriteLast, the
//     agent's ArmResume) and, once its box is restored on a new
//     connection, taken over by a new stream that the new host opens with
//     a resume frame carrying the checkpoint's nonce (WriteResume,
//     ResumeOn); a resume anywhere else is a breach (see resume.go).
//
// Why our own rather than github.com/hashicorp/yamux (v0.1.2, read for
// this): it answers each ping in a goroutine of its own, which a peer
// that sends pings and reads nothing multiplies without bound (each lives
// until its write times out); it bounds only streams not yet accepted
// (AcceptBacklog), not those open, so its memory is the peer's streams
// times a window of at least 256 KiB with no total; it takes frames with
// any flag combination; and it is a new module. Its speed was not
// measured in a committed benchmark, so none is claimed here.
//
// BenchmarkBulk* (64 KiB writes) and BenchmarkRoundTrip* (one byte each
// way) measure a channel over a unix socket pair against a pipe (the fd
// path's stdout) and a bare socket (the control connection's round
// trip); docs/protocol.md gives the figures. The frames of all channels
// take turns at one write lock in no fixed order, so a control frame may
// wait behind one data frame (at most MaxPayload) of every other channel
// writing at once, not behind just one.
package streammux
