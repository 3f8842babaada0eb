package interp

import _ "embed"

// jsDriver is the Node.js side of the protocol, passed whole as the -e
// argument so it needs no file in the sandbox.
//
//go:embed driver/js_driver.js
var jsDriver string

// javascriptLanguage runs the driver under node.
var javascriptLanguage = &language{
	name:      "javascript",
	program:   "node",
	hostPaths: []string{"/usr/bin/node", "/usr/local/bin/node"},
	args:      []string{"-e", jsDriver},
	oneShot:   []string{"-e"},
	send:      writeJSONRequest,
}
