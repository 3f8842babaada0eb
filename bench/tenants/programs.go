package main

import "strconv"

// The hostile programs. Each runs only inside a Warden sandbox with
// limits, and each ends by itself: it takes its duration in seconds as
// its first argument and stops then, whatever Warden does. Network
// traffic goes only to loopback.

// secs formats a duration argument of a program.
func secs(s float64) string { return strconv.FormatFloat(s, 'f', 1, 64) }

// python is the interpreter every sandbox resolves python3 to.
const python = "/usr/bin/python3"

// yesFlood writes as fast as yes can.
func yesFlood(s float64) []string { return []string{"timeout", secs(s), "yes"} }

// byteWrites writes one byte per write(2): the most syscalls and pipe
// wake-ups per byte.
func byteWrites(s float64) []string { return []string{python, "-c", byteWritesPy, secs(s)} }

const byteWritesPy = `import os, sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(1000):
        os.write(1, b"x")
`

// tinyExecs starts /bin/true in a tight loop: a process start per turn.
func tinyExecs(s float64) []string {
	return []string{"timeout", secs(s), "sh", "-c", "while :; do /bin/true; done"}
}

// egressFlood opens connections to the sandbox's egress proxy and asks
// for a CONNECT it must refuse (loopback is never reachable), as fast as
// it can. Were the proxy broken, the connection would reach the
// discard port of the host's own loopback.
func egressFlood(s float64) []string { return []string{python, "-c", egressFloodPy, secs(s)} }

const egressFloodPy = `import socket, sys, time
end = time.monotonic() + float(sys.argv[1])
req = b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n"
n = 0
while time.monotonic() < end:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", 3128))
        s.sendall(req)
        s.recv(64)
    except OSError:
        pass
    finally:
        s.close()
    n += 1
print(n, "connections")
`

// pyYes is a Python cell that runs yes through os.system: a flood from
// a child of the interpreter, whose output the interpreter's pipes carry.
func pyYes(s float64) string {
	return "import os\nos.system('timeout " + secs(s) + " yes')"
}

// pyPrint is a Python cell printing a short line in a loop: a flood
// through the interpreter's own stdout.
func pyPrint(s float64) string {
	return "import time\nend = time.monotonic() + " + secs(s) +
		"\nwhile time.monotonic() < end:\n    for _ in range(1000):\n        print('x')"
}

// spinner burns CPU and nothing else: the control, whose host cost
// should be nil.
func spinner(s float64) []string { return []string{python, "-c", spinnerPy, secs(s)} }

const spinnerPy = `import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
`

// forkBomb forks from every process as fast as it can, reaping what it
// can. It refuses to start unless a process limit is in force (Warden
// sets RLIMIT_NPROC to the sandbox's pids limit; no cgroup file is
// visible inside), lowers that limit further to forkBombCap itself, and
// every process stops at the deadline.
func forkBomb(s float64) []string { return []string{python, "-c", forkBombPy, secs(s)} }

const forkBombPy = `import os, resource, sys, time
end = time.monotonic() + float(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
if soft == resource.RLIM_INFINITY or soft > 1024:
    sys.exit("forkbomb: refusing to start: RLIMIT_NPROC is %r, so no process limit is in force" % soft)
cap = min(soft, 64)
resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
turns = 0
while time.monotonic() < end and turns < 1000000:
    turns += 1
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.fork()
    except OSError:
        time.sleep(0.001)
os._exit(0)
`

// memBomb allocates and touches memory in a child until the kernel kills
// it at the memory limit, then again, until the deadline. It refuses a
// limit it was not told or one over 1 GiB, and caps its own address
// space at twice the limit plus 64 MiB (RLIMIT_AS), so a sandbox whose
// memory limit is not in force costs the host at most that.
func memBomb(s float64, limit int64) []string {
	return []string{python, "-c", memBombPy, secs(s), strconv.FormatInt(limit, 10)}
}

const memBombPy = `import os, resource, sys, time
end = time.monotonic() + float(sys.argv[1])
limit = int(sys.argv[2])
if limit <= 0 or limit > 1 << 30:
    sys.exit("membomb: refusing to start: memory limit %d is not in (0, 1 GiB]" % limit)
cap = 2 * limit + (64 << 20)
while time.monotonic() < end:
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        hog = []
        try:
            while time.monotonic() < end and len(hog) * (8 << 20) < cap:
                hog.append(b"\x01" * (8 << 20))
        except MemoryError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
`
