// Package unixlisten checks a descriptor handed to a sandbox as its way
// in: a listening AF_UNIX stream socket and nothing else. It is the one
// source of that check for native.Runtime.ListenerStdin (`warden run
// --stdin-listener`) and `warden-init pod --listen-fd`. Only AF_UNIX,
// because an inet socket of the host's network namespace inside a box
// would be its way out: an accepted TCP socket can be disconnected with
// connect(AF_UNSPEC) and then connected anywhere the host routes, or
// bound to a host port. A listening or connected AF_UNIX stream socket
// cannot be connected again (the kernel answers EINVAL or EISCONN), so
// the launcher relays each TCP connection into the box over one.
package unixlisten
