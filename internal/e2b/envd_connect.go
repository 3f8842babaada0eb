package e2b

import "connectrpc.com/connect"

// noCompression takes gzip out of a Connect handler's encodings, both
// ways. connect-go accepts gzip-compressed requests by default and
// inflates a compressed message in full before it checks its size against
// WithReadMaxBytes, so a 2 MiB bomb cost the host 2 GiB of inflating; the
// SDK (connect-web) never compresses requests, and its responses are
// small enough to send as they are. A compressed request is refused with
// Connect's unimplemented error, which names the encodings served (none).
var noCompression = connect.WithCompression("gzip", nil, nil)
