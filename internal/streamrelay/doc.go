// Package streamrelay copies a process's pipe to or from a streammux
// channel: the one relay both ends of the agent protocol over a byte
// stream run for each of a process's fds (nsinit.Config.Stream), the
// host between its pipe and the channel, the agent between the channel
// and the process's pipe.
//
// Each relay holds one fixed buffer (Buffer bytes), so its memory is
// bounded whatever the peer sends; what it has not copied yet stays in
// the pipe or in the channel's window. It reads only once its last write
// is done, so a writer that blocks (a full pipe its reader paces, a
// channel with no credit) stops the relay's reads and, through the
// channel's credit, the peer: end-to-end backpressure.
package streamrelay
