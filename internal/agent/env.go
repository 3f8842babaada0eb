package agent

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// IO connects a run to its caller. A nil Stdin reads as empty; nil Stdout
// or Stderr only captures into the Result.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Hostname is every sandbox's hostname: it reveals nothing of the host.
const Hostname = "sandbox"

// baseEnv is the whole environment a program starts with before the
// caller's --env; nothing of the host's environment is passed in.
var baseEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/home/sandbox",
	"USER=sandbox",
	"LOGNAME=sandbox",
	"SHELL=/bin/sh",
	"LANG=C.UTF-8",
	"TMPDIR=/tmp",
	"PWD=/workspace",
	"MPLBACKEND=Agg",
}

// Env is a process's environment in a sandbox: the base, the proxy's
// when the sandbox has one, then extra; a later KEY wins.
func Env(withProxy bool, extra []string) []string {
	return ImageEnv(withProxy, nil, extra)
}

// wardenKeys are the base's variables an image's environment cannot
// change: they say who the sandbox user is and where its writable places
// are, which Warden decides on every root.
var wardenKeys = []string{"HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "PWD"}

// ImageEnv is Env on a template's root: the image's environment (its
// config's ENV: PATH, LANG, ...) goes over the base, except wardenKeys;
// the proxy's goes over the image's (an image cannot route the sandbox
// around the egress proxy), and extra over all, as in Env.
func ImageEnv(withProxy bool, image, extra []string) []string {
	var img []string
	for _, kv := range image {
		if key, _, _ := strings.Cut(kv, "="); !slices.Contains(wardenKeys, key) {
			img = append(img, kv)
		}
	}
	if withProxy {
		img = append(img, proxyEnv...)
	}
	env := append([]string(nil), baseEnv...)
	for _, kv := range append(img, extra...) {
		key, _, _ := strings.Cut(kv, "=")
		env = removeKey(env, key)
		env = append(env, kv)
	}
	return env
}

func removeKey(env []string, key string) []string {
	out := env[:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return out
}

// EgressPort is where, on its own loopback, a sandbox with --net proxy
// finds the proxy (through the init's bridge): 3128, the port proxies
// customarily use.
const EgressPort = 3128

// proxyEnv points every common HTTP client at the bridge, and keeps local
// traffic off it.
var proxyEnv = func() []string {
	url := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	return []string{
		"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url, "https_proxy=" + url,
		"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1",
	}
}()

// ms is d in milliseconds, as a Result reports times.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
