//go:build !linux

package doctor

// executorCheck has nothing to report off Linux, where no sandbox runs.
func executorCheck() Check {
	return Check{Name: "fast executor", Status: OK, Detail: "not on Linux"}
}
