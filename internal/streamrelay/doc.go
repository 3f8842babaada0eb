// Package streamrelay copies a process's pipe to or from a streammux
// channel: the relay the host runs for each of a process's fds over the
// agent protocol's byte stream (nsinit.Config.Stream), between its pipe
// and the channel. The agent's end, between the channel and the
// process's pipe, runs its own loop with the same discipline and Buffer
// (nsinit's streamRelay), which can also park a relay, with the bytes it
// held, across a checkpoint's cut of the stream.
//
// Each relay holds one fixed buffer (Buffer bytes), so its memory is
// bounded whatever the peer sends; what it has not copied yet stays in
// the pipe or in the channel's window. It reads only once its last write
// is done, so a writer that blocks (a full pipe its reader paces, a
// channel with no credit) stops the relay's reads and, through the
// channel's credit, the peer: end-to-end backpressure.
package streamrelay
