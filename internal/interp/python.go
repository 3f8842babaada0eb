package interp

import _ "embed"

// pythonDriver is the Python side of the protocol. It is passed whole as
// the -c argument, so it needs no file in the sandbox: the sandbox may
// show only the host's /usr and a writable /tmp and /workspace.
//
//go:embed driver/python_driver.py
var pythonDriver string

// pythonLanguage runs a stdlib-only driver under python3 -u (unbuffered,
// so output reaches the host as it is written). MPLBACKEND=Agg makes
// matplotlib draw off-screen, where the driver collects each figure.
var pythonLanguage = &language{
	name:      "python",
	program:   "python3",
	hostPaths: []string{"/usr/bin/python3", "/usr/local/bin/python3"},
	args:      []string{"-u", "-c", pythonDriver},
	oneShot:   []string{"-c"},
	env:       []string{"MPLBACKEND=Agg", "PYTHONIOENCODING=utf-8"},
	send:      writeJSONRequest,
}
