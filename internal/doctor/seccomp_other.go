//go:build !linux

package doctor

// seccompCheck reports that seccomp exists only on Linux.
func seccompCheck() Check {
	return Check{Name: "seccomp filter", Status: Missing, Detail: "seccomp exists only on Linux"}
}
